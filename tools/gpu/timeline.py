#!/usr/bin/env python3
"""What one `rtaccel run`'s timeline holds, checked: the trace's format
(tests/python/trace_format.py, the strict check the tests use) and, per
source, how many events it put on the run's trace.json, beside what the
run's summary.json says of its chains, its monitor and its interposer.

    timeline.py RUN_DIR [--require CAT,...]

Prints one JSON object. Exit 1 when the trace breaks the format or lacks an
event category named in --require (e.g. cuda,lock,gpu for a run of the cuda
backend under --shim, regulator for one with isolation, gang with --gang)."""

import argparse
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "python"))
import trace_format  # noqa: E402


def describe(run: Path) -> dict:
    doc = json.loads((run / "trace.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    problems = trace_format.check(doc)
    processes = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    # The interposer's processes by their program, the rest by category.
    by_category = collections.Counter()
    by_shim_process = collections.defaultdict(collections.Counter)
    for e in doc["traceEvents"]:
        if e.get("ph") == "M":
            continue
        category = e.get("cat") or "(none)"
        by_category[category] += 1
        name = processes.get(e.get("pid"), "")
        if name.startswith("shim: "):
            by_shim_process[name][category] += 1
    flows = {e["id"] for e in doc["traceEvents"] if e.get("ph") == "s"}
    chains = [{k: c.get(k) for k in ("chain", "critical", "count", "max_us", "wcrt_us", "bound_held",
                                     "over_bound", "deadline_misses")} for c in summary.get("chains", [])]
    assumptions = summary.get("assumptions", {})
    shim = summary.get("shim") or {}
    return {
        "run": str(run),
        "policy": summary.get("policy"),
        "format_problems": len(problems),
        "first_problems": problems[:5],
        "events": sum(by_category.values()),
        "by_category": dict(sorted(by_category.items())),
        "chain_instances_with_flow": len(flows),
        "processes": sorted(processes.values()),
        "shim_processes": {name: dict(counts) for name, counts in sorted(by_shim_process.items())},
        "shim_cuda_calls": {p["process"]: p.get("cuda_calls") for p in shim.get("processes", [])},
        "critical_bounds_held": summary.get("critical_bounds_held"),
        "chains": chains,
        "unexplained_violations": assumptions.get("unexplained_violations"),
        "broken": assumptions.get("broken", [])[:8],
        "isolation": bool(summary.get("isolation")),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="an `rtaccel run` result folder")
    parser.add_argument("--require", default="", help="event categories the trace must hold, comma-separated")
    args = parser.parse_args(argv)
    try:
        found = describe(args.run)
    except (OSError, ValueError, KeyError) as e:
        print(f"timeline.py: {args.run}: {e}", file=sys.stderr)
        return 1
    missing = [c for c in args.require.split(",") if c and not found["by_category"].get(c)]
    found["missing"] = missing
    print(json.dumps(found))
    return 1 if found["format_problems"] or missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
