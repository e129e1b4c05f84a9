#!/usr/bin/env python3
"""Runs bench/lock_bench (Google Benchmark) plain and under the interposer's
tracer, and prints the ratios docs/benchmarks.md records:

- rtaccel's phase-fair read+write pair against glibc's rwlock (goal <= 1.5x);
- the same with boosting on;
- the tracer's cost per lock operation.

usage: bench/lock_bench.py [--build build] [--min-time 0.2]
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(binary, min_time, env_extra=None, bench_filter="."):
    env = dict(os.environ, **(env_extra or {}))
    out = subprocess.run([str(binary), f"--benchmark_min_time={min_time}",
                          f"--benchmark_filter={bench_filter}", "--benchmark_format=json",
                          "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"],
                         capture_output=True, text=True, env=env, check=True).stdout
    data = json.loads(out)
    if data["context"].get("library_build_type") == "debug":
        print("# warning: Google Benchmark library built without optimisation", file=sys.stderr)
    return {b["run_name"]: b["cpu_time"] for b in data["benchmarks"]
            if b.get("aggregate_name") == "median"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--min-time", default="0.2")
    args = ap.parse_args()
    binary = Path(args.build) / "lock_bench"
    shim = ROOT / "python" / "rtaccel" / "lib" / "librtaccel_shim.so"
    plain = run(binary, args.min_time)
    traced = run(binary, args.min_time,
                 {"LD_PRELOAD": str(shim), "RTACCEL_SHIM": "trace", "RTACCEL_SHIM_OUT": "/tmp"},
                 "Glibc")
    print(f"# {os.uname().nodename}, {os.cpu_count()} CPUs; median CPU ns per lock+unlock pair")
    print(f"{'benchmark':<44} {'ns':>8}")
    for name, ns in plain.items():
        print(f"{name:<44} {ns:>8.1f}")

    def pair(prefix, suffix):
        return plain[f"{prefix}Read{suffix}"] + plain[f"{prefix}Write{suffix}"]

    glibc = pair("GlibcRwlock", "/threads:1")
    pf = pair("PhaseFair", "/boost:0/threads:1")
    pf_boost = pair("PhaseFair", "/boost:1/threads:1")
    print(f"# phase-fair rd+wr pair / glibc rwlock rd+wr pair: {pf / glibc:.2f}x "
          f"(goal <= 1.5x); with boosting {pf_boost / glibc:.2f}x")
    for name in ("GlibcMutex/threads:1", "GlibcRwlockRead/threads:1",
                 "GlibcRwlockWrite/threads:1"):
        extra = (traced[name] - plain[name]) / 2
        print(f"# tracer cost, {name.split('/')[0]}: {traced[name]:.1f} ns vs {plain[name]:.1f} ns"
              f" per pair, +{extra:.1f} ns per lock operation")


if __name__ == "__main__":
    main()
