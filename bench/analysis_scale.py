#!/usr/bin/env python3
"""How long the response-time analysis takes for many chains, and what it
answers, so that two builds can be set side by side.

Two shapes of workload, made here:
- "registrations": N critical chains of eight callbacks on eight executors
  of one core, one segment each on one device: what `rtaccel bench
  registrations` has the server admit, whose every admission analyses them
  all;
- "mixed": N groups of three chains (a shared head and middle, a fusion in
  every fourth group, release times that coincide), on three cores of three
  executors each and two devices, a third of the segments spinning, some
  chains over their period: each refinement of docs/analysis.md at work.

Each is analysed in each mode (rtaccel's, --paper-blocking, --horizon
deadline, --gang), timed in this process (the best of --repeat). --save DIR
writes every analysis as JSON (the chains' bounds, terms and reasons): the
same DIR from two builds, compared with `diff -r`, says whether a change to
the analysis changed any bound.

usage: .venv/bin/python bench/analysis_scale.py [--registrations 25,50,99] [--mixed 8,30,60]
                                                [--repeat 3] [--save DIR] [--json]
"""

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from rtaccel import analysis  # noqa: E402

MODES = {
    "rtaccel": {},
    "paper": {"paper_blocking": True},
    "deadline": {"horizon": "deadline"},
    "gang": {"gang": True},
}


def registrations_workload(chains: int) -> str:
    lines = ["version: 1", f"name: registrations-{chains}", "platform:", "  cores: 3", "  accelerators:",
             "    - {name: acc0, backend: cpu, core: 1, priority_levels: 4, preemption_cost_us: 50}",
             "server: {core: 2, overhead_us: 50}", "executors:"]
    lines += [f"  - {{name: ex{k}, core: 0, priority: {10 + k}}}" for k in range(8)]
    lines.append("callbacks:")
    for c in range(chains):
        for k in range(8):
            trigger = "{timer_ms: 100000}" if k == 0 else f"{{topic: c{c}k{k - 1}}}"
            publishes = f", publishes: c{c}k{k}" if k < 7 else ""
            lines.append(f"  - {{name: c{c}k{k}, executor: ex{k}, trigger: {trigger}{publishes}, cpu_us: 0, "
                         "segments: [{accelerator: acc0, service: busy, wcet_us: 1}]}")
    lines.append("chains:")
    for c in range(chains):
        path = ", ".join(f"c{c}k{k}" for k in range(8))
        lines.append(f"  - {{name: chain{c}, priority: {1 + c}, path: [{path}], deadline_ms: 100000}}")
    return "\n".join(lines) + "\n"


def mixed_workload(groups: int, seed: int) -> str:
    rnd = random.Random(seed)
    cores, tiers, devices = 3, 3, 2
    lines = ["version: 1", f"name: mixed-{groups}", "platform:", f"  cores: {cores + devices + 1}",
             "  release_jitter_us: 50", "  accelerators:"]
    lines += [f"    - {{name: acc{a}, backend: cpu, core: {cores + a}, priority_levels: {rnd.choice([1, 2, 4, 8])}, "
              "preemption_cost_us: 30}" for a in range(devices)]
    lines += [f"server: {{core: {cores + devices}, overhead_us: 40}}", "executors:"]
    lines += [f"  - {{name: ex{c}_{t}, core: {c}, priority: {10 + 10 * t + c}}}"
              for c in range(cores) for t in range(tiers)]
    lines.append("callbacks:")
    rank = list(range(groups))
    rnd.shuffle(rank)
    chains = []

    def callback(name, tier, trigger, publishes=None):
        segments = ""
        if rnd.random() < 0.7:
            parts = [f"{{accelerator: acc{rnd.randrange(devices)}, service: busy, wcet_us: {rnd.randint(10, 150)}}}"
                     for _ in range(rnd.choice([1, 1, 2]))]
            segments = f", segments: [{', '.join(parts)}]" + (", wait: spin" if rnd.random() < 0.3 else "")
        out = f", publishes: {publishes}" if publishes else ""
        lines.append(f"  - {{name: {name}, executor: ex{rnd.randrange(cores)}_{tier}, trigger: {trigger}{out}, "
                     f"cpu_us: {rnd.randint(10, 150)}{segments}}}")

    for g in range(groups):
        # More critical groups on executors of higher priority, as a system
        # would be set up.
        tier = tiers - 1 - rank[g] * tiers // groups
        period = rnd.choice([100, 200, 400, 500, 1000])
        p = f"g{g}"
        callback(f"{p}t", tier, f"{{timer_ms: {period}}}", f"{p}t_out")
        callback(f"{p}m1", tier, f"{{topic: {p}t_out}}", f"{p}m1_out")
        callback(f"{p}m2", tier, f"{{topic: {p}m1_out}}", f"{p}m2_out")
        callback(f"{p}x", tier, f"{{topic: {p}m1_out}}")
        callback(f"{p}u", tier, f"{{timer_ms: {period}}}", f"{p}u_out")
        if g % 4 == 0:
            callback(f"{p}f", tier, f"{{topics: [{p}m2_out, {p}u_out]}}")
            chains.append((g, f"{p}a", [f"{p}t", f"{p}m1", f"{p}m2", f"{p}f"]))
        else:
            callback(f"{p}f", tier, f"{{topic: {p}u_out}}")
            chains.append((g, f"{p}a", [f"{p}t", f"{p}m1", f"{p}m2"]))
        chains.append((g, f"{p}c", [f"{p}u", f"{p}f"]))
        chains.append((g, f"{p}b", [f"{p}t", f"{p}m1", f"{p}x"]))
    lines.append("chains:")
    chains.sort(key=lambda c: (rank[c[0]], rnd.random()))
    for n, (_, name, path) in enumerate(chains):
        critical = "true" if rnd.random() < 0.6 else "false"
        lines.append(f"  - {{name: {name}, priority: {len(chains) - n}, path: [{', '.join(path)}], "
                     f"critical: {critical}}}")
    return "\n".join(lines) + "\n"


def counts(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: not a comma-separated list of counts")
    if any(v < 1 or v > 500 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: counts from 1 to 500")
    return values


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--registrations", type=counts, default=[25, 50, 99], help="chains of eight callbacks")
    ap.add_argument("--mixed", type=counts, default=[8, 30, 60], help="groups of three chains")
    ap.add_argument("--repeat", type=int, default=3, choices=range(1, 101), metavar="N",
                    help="analyses per workload and mode, the fastest counted (default 3)")
    ap.add_argument("--save", metavar="DIR", help="write each analysis' chains as JSON into DIR")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = ap.parse_args()

    save = Path(args.save) if args.save else None
    if save:
        save.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="rtaccel-analysis-scale.") as tmp:
        workloads = [(f"registrations-{n}", registrations_workload(n), n) for n in args.registrations]
        workloads += [(f"mixed-{n}", mixed_workload(n, seed=n), 3 * n) for n in args.mixed]
        for name, text, chains in workloads:
            path = Path(tmp) / f"{name}.yaml"
            path.write_text(text)
            for mode, options in MODES.items():
                best = float("inf")
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    _, results = analysis.analyze_file(str(path), machine_cores=8, **options)
                    best = min(best, time.perf_counter() - start)
                bounded = sum(1 for r in results if r.bounded)
                rows.append({"workload": name, "chains": chains, "mode": mode, "ms": round(best * 1e3, 3),
                             "bounded": bounded})
                if save:
                    doc = [analysis.chain_to_dict(r) for r in results]
                    (save / f"{name}.{mode}.json").write_text(json.dumps(doc, indent=1) + "\n")
    if args.json:
        print(json.dumps({"version": 1, "benchmark": "analysis-scale", "repeat": args.repeat, "runs": rows},
                         indent=2))
        return 0
    print(f"# the analysis of every chain, the fastest of {args.repeat} (load and analysis, in this process)")
    print(f"{'workload':<20} {'chains':>6} {'mode':<9} {'ms':>10} {'bounded':>8}")
    for r in rows:
        print(f"{r['workload']:<20} {r['chains']:>6} {r['mode']:<9} {r['ms']:>10.3f} {r['bounded']:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
