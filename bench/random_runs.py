#!/usr/bin/env python3
"""Random small workloads run for real under paam, each instance over its
bound checked by the run's monitor: an instance the run cannot explain (no
assumption of the analysis broken in its time, or beyond the bound of the
run's own times by more than its cores lost) is evidence against the
analysis. The examples exercise a few shapes; these exercise many.

Each workload fits a 2-core machine: its executors on core 0, the
accelerator and the server on core 1. It has two to four chains of one to
four callbacks on one to three executors; chains that share their head, a
fusion now and then, periods that are and are not multiples of each other,
spinning and suspending waits, busy and matmul kernels, one to four device
priority levels. Only workloads with critical chains, all with bounds within
their deadlines, are run (the server would refuse the others).

usage: .venv/bin/python bench/random_runs.py [--count 12] [--seed 1 | --seeds 4,9,123] [--duration 10]
                                             [--calibrated] [--gang] [--backend cpu|opencl]
                                             [--fusions] [--out DIR] [--json]
--calibrated measures this machine's overheads first (`rtaccel calibrate`,
into DIR/calibration.json through $RTACCEL_CALIBRATION) and analyses and
runs with them; without it, with each workload's own. --gang analyses and
runs them under gang scheduling (each executor a gang of its own), which
the gang analysis bounds instead of paam's. --backend opencl puts the
accelerator on the OpenCL device (one level) instead of core 1. --fusions
keeps only the workloads with a fusion, whose waits the analysis bounds
from the other input's rate. --seeds runs the workloads of those seeds that
have bounds, and no others, to run again what an earlier run made.
Exit status 1 when some run had instances over their bound that it could not
explain (or failed), 0 otherwise.
"""

import argparse
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from rtaccel import analysis  # noqa: E402

PERIODS_MS = [20, 25, 40, 50, 60, 100]
FUSED_CHAIN = "fused"  # the chain through a workload's fusion, if it has one
FUSED = f"{{name: {FUSED_CHAIN}, "


def random_workload(seed: int, backend: str = "cpu") -> str:
    rnd = random.Random(seed)
    levels = rnd.choice([1, 2, 4])
    if backend == "opencl":  # one in-order queue, on no core of its own
        levels = 1
    lines = ["version: 1", f"name: random-{seed}", "platform:", "  accelerators:",
             f"    - {{name: acc0, backend: {backend},{' core: 1,' if backend == 'cpu' else ''} "
             f"priority_levels: {levels}, preemption_cost_us: 50}}",
             "server: {core: 1, overhead_us: 60}", "executors:"]
    executors = rnd.randint(1, 3)
    lines += [f"  - {{name: ex{e}, core: 0, priority: {80 + e}}}" for e in range(executors)]
    lines.append("callbacks:")
    # callbacks: (name, topics it reads, topic it may publish, its keys before
    # and after `publishes`)
    callbacks, chains = [], []

    def callback(name, trigger, reads=None, publishes=None):
        cpu = rnd.randint(100, 1500)
        parts = []
        if rnd.random() < 0.6:
            service = rnd.choice(["busy", "busy", "matmul"])
            parts.append(f", segments: [{{accelerator: acc0, service: {service}, wcet_us: {rnd.randint(500, 3000)}}}]")
            if rnd.random() < 0.25:
                parts.append(", wait: spin")
        executor = rnd.randrange(executors)
        callbacks.append((name, reads or [], publishes, f"executor: ex{executor}, trigger: {trigger}",
                          f"cpu_us: {cpu}{''.join(parts)}"))

    def topic(source):
        return f"{{topic: {source}_out}}", [f"{source}_out"]

    for c in range(rnd.randint(2, 4)):
        period = rnd.choice(PERIODS_MS)
        length = rnd.randint(1, 4)
        names = [f"c{c}k{k}" for k in range(length)]
        for k, name in enumerate(names):
            trigger, reads = (f"{{timer_ms: {period}}}", None) if k == 0 else topic(names[k - 1])
            # A chain of one publishes too: a fusion below may read it.
            callback(name, trigger, reads, f"{name}_out" if k < length - 1 or length == 1 else None)
        chains.append((f"chain{c}", names, period))
        if length > 1 and rnd.random() < 0.3:
            # Another chain from the same head: the head's output, a branch.
            branch = f"c{c}b"
            callback(branch, *topic(names[0]))
            chains.append((f"chain{c}b", [names[0], branch], period))
    # A fusion of two heads' outputs where two one-callback chains allow it.
    singles = [(n, p) for n, p, _ in chains if len(p) == 1]
    if len(singles) >= 2 and rnd.random() < 0.5:
        (_, a), (_, b) = singles[:2]
        callback("fusion", f"{{topics: [{a[0]}_out, {b[0]}_out]}}", [f"{a[0]}_out", f"{b[0]}_out"])
        period = dict((n, per) for n, _, per in chains)[singles[0][0]]
        chains.append((FUSED_CHAIN, [a[0], "fusion"], period))
    # What nobody reads is not published.
    read = {t for _, reads, _, _, _ in callbacks for t in reads}
    for name, _, publishes, head, tail in callbacks:
        out = f", publishes: {publishes}" if publishes in read else ""
        lines.append(f"  - {{name: {name}, {head}{out}, {tail}}}")
    lines.append("chains:")
    order = list(range(len(chains)))
    rnd.shuffle(order)
    for rank, i in enumerate(order):
        name, path, period = chains[i]
        critical = "true" if rnd.random() < 0.7 else "false"
        lines.append(f"  - {{name: {name}, priority: {rank + 1}, path: [{', '.join(path)}], "
                     f"deadline_ms: {period}, critical: {critical}}}")
    return "\n".join(lines) + "\n"


def schedulable(path: Path, calibration: dict | None, gang: bool = False) -> bool:
    try:
        _, results = analysis.analyze_file(str(path), calibration=calibration, gang=gang)
    except Exception:  # a shape the loader refuses: not a workload to run
        return False
    critical = [r for r in results if r.critical]
    return bool(critical) and all(r.bounded and r.schedulable for r in critical)


def rtaccel(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.run([sys.executable, "-m", "rtaccel.cli", *args], env=env, capture_output=True, text=True)


def run(path: Path, out: Path, duration: float, gang: bool = False) -> dict:
    proc = rtaccel("run", str(path), "--policy", "paam", "--duration", str(duration), "--out", str(out), "--quiet",
                   "--gang" if gang else "--no-gang")
    summary_path = out / "summary.json"
    if not summary_path.exists():
        return {"failed": (proc.stdout + proc.stderr).strip()[-400:]}
    s = json.loads(summary_path.read_text())
    chains = [{"chain": c["chain"], "wcrt_us": c["wcrt_us"], "max_us": c["max_us"],
               "over_bound": c.get("over_bound") or 0, "unexplained": c.get("unexplained", 0),
               "count": c["count"]}
              for c in s["chains"] if c["critical"] and c.get("wcrt_us")]
    return {"failed": s.get("failed"), "chains": chains}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=12, help="workloads to run (default 12)")
    ap.add_argument("--seed", type=int, default=1, help="first seed (default 1)")
    ap.add_argument("--seeds", help="these seeds only, comma-separated (instead of --count and --seed)")
    ap.add_argument("--duration", type=float, default=10, help="seconds per run (default 10)")
    ap.add_argument("--calibrated", action="store_true", help="measure this machine's overheads first, and use them")
    ap.add_argument("--gang", action="store_true", help="gang scheduling, and the gang analysis")
    ap.add_argument("--backend", choices=["cpu", "opencl"], default="cpu", help="the accelerator's (default cpu)")
    ap.add_argument("--fusions", action="store_true", help="only workloads with a fusion")
    ap.add_argument("--out", help="folder for the workloads and runs (default: a temporary one)")
    ap.add_argument("--json", action="store_true", help="print JSON")
    args = ap.parse_args()
    if args.count < 1 or not args.duration > 0:
        ap.error("--count must be at least 1 and --duration above 0")
    seeds = None
    if args.seeds is not None:
        try:
            seeds = [int(x) for x in args.seeds.split(",")]
        except ValueError:
            ap.error(f"--seeds must be whole numbers separated by commas, got '{args.seeds}'")
    folder = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="rtaccel-random-"))
    folder.mkdir(parents=True, exist_ok=True)
    calibration = None
    if args.calibrated:
        os.environ["RTACCEL_CALIBRATION"] = str(folder / "calibration.json")
        done = rtaccel("calibrate")
        if done.returncode != 0:
            print(f"rtaccel calibrate failed: {(done.stdout + done.stderr).strip()}", file=sys.stderr)
            return 2
        calibration = json.loads((folder / "calibration.json").read_text())
    runs, tried = [], 0
    for seed in seeds if seeds is not None else itertools.count(args.seed):
        if seeds is None and (len(runs) == args.count or tried == 50 * args.count):
            break
        tried += 1
        path = folder / f"random-{seed}.yaml"
        text = random_workload(seed, args.backend)
        path.write_text(text)
        if (not args.fusions or FUSED in text) and schedulable(path, calibration, args.gang):
            result = run(path, folder / f"run-{seed}", args.duration, args.gang)
            runs.append({"seed": seed, "workload": str(path), **result})
            if not args.json:
                print(_line(runs[-1]), flush=True)
        else:
            path.unlink()
    unexplained = sum(c["unexplained"] for r in runs for c in r.get("chains", []))
    failed = [r["seed"] for r in runs if r.get("failed")]
    result = {"runs": runs, "tried": tried, "unexplained": unexplained, "failed": failed, "folder": str(folder),
              "calibration": calibration, "gang": args.gang, "backend": args.backend, "fusions": args.fusions}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        over = sum(c["over_bound"] for r in runs for c in r.get("chains", []))
        print(f"# {len(runs)} workloads run of {tried} made ({folder}); {over} instances over their bound, "
              f"{unexplained} unexplained; {len(failed)} runs failed")
    return 1 if unexplained or failed else 0


def _line(r: dict) -> str:
    if r.get("failed"):
        return f"random-{r['seed']}: failed: {r['failed']}"
    parts = [f"{c['chain']} {c['max_us'] / 1000:.1f}/{c['wcrt_us'] / 1000:.1f} ms"
             f" ({c['over_bound']} over, {c['unexplained']} unexplained)" for c in r["chains"]]
    return f"random-{r['seed']}: " + "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
