"""CUDA graphs against per-kernel launches: lock operations and launch time per
inference of a small network (the ECRTS'24 paper's Table 2), with PyTorch.

    python bench/cuda_graphs.py [--inferences N] [--json]

For each mode (eager: one launch per layer; graph: one cudaGraphLaunch per
inference) the script runs itself twice under `rtaccel shim --trace`, with N
and 2N inferences, and takes the difference, so that start-up and warm-up
cancel out: pthread lock operations per inference inside CUDA runtime calls
and in all, CUDA runtime calls per inference, and the host time to issue one
inference. Exits 77 with the reason when PyTorch or a GPU is missing."""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def network(torch):
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(8), torch.nn.Flatten(),
        torch.nn.Linear(32 * 64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10),
    ).cuda().eval()


def worker(mode: str, inferences: int) -> dict:
    """Runs inside the shim: warm up, then time `inferences` inferences."""
    import torch

    model = network(torch)
    x = torch.randn(1, 3, 64, 64, device="cuda")
    stream = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(stream):
        for _ in range(10):
            model(x)
        stream.synchronize()
        if mode == "graph":
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                model(x)
            run = graph.replay
        else:
            def run():
                model(x)
        run()
        stream.synchronize()
        issue = []
        for _ in range(inferences):
            t0 = time.perf_counter_ns()
            run()
            issue.append(time.perf_counter_ns() - t0)
            stream.synchronize()
    issue.sort()
    return {"issue_ns_mean": sum(issue) / max(len(issue), 1),
            "issue_ns_max": issue[-1] if issue else 0}


def traced(mode: str, inferences: int) -> dict:
    from rtaccel import locks

    with tempfile.TemporaryDirectory(prefix="rtaccel-graphs-") as out:
        env = locks.shim_environment(["trace"], out)
        proc = subprocess.run([sys.executable, __file__, "--worker", mode,
                               "--inferences", str(inferences)],
                              capture_output=True, text=True, env=env, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip() or proc.stdout.strip())
        timing = json.loads(proc.stdout.strip().splitlines()[-1])
        reports = [r for r in locks.load_lockstat([out]) if r.get("cuda", {}).get("calls")]
    report = reports[0]
    calls = report["cuda"]["calls"]
    return dict(timing,
                cuda_calls=sum(c["calls"] for c in calls),
                cuda_lock_ops=sum(c["lock_ops"] for c in calls),
                lock_ops=sum(l["acquisitions"] for l in report["locks"]),
                static_runtime=report["cuda"]["static_runtime"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inferences", type=int, default=500)
    p.add_argument("--json", action="store_true")
    p.add_argument("--worker", choices=("eager", "graph"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.inferences)))
        return 0
    try:
        import torch
    except ImportError:
        print("SKIP: PyTorch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device for PyTorch")
        return 77
    n = args.inferences
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "cuda": torch.version.cuda, "inferences": n, "modes": {}}
    for mode in ("eager", "graph"):
        one, two = traced(mode, n), traced(mode, 2 * n)
        result["modes"][mode] = {
            "cuda_calls_per_inference": (two["cuda_calls"] - one["cuda_calls"]) / n,
            "cuda_lock_ops_per_inference": (two["cuda_lock_ops"] - one["cuda_lock_ops"]) / n,
            "lock_ops_per_inference": (two["lock_ops"] - one["lock_ops"]) / n,
            "issue_us_mean": two["issue_ns_mean"] / 1000.0,
            "issue_us_max": two["issue_ns_max"] / 1000.0,
            "static_runtime": two["static_runtime"],
        }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"# {result['device']}, PyTorch {result['torch']} (CUDA {result['cuda']}), "
          f"{n} inferences per run")
    print(f"{'mode':6s} {'cuda calls':>11s} {'locks in cuda':>14s} {'locks (all)':>12s} "
          f"{'issue mean us':>14s} {'issue max us':>13s}   (per inference)")
    for mode, m in result["modes"].items():
        print(f"{mode:6s} {m['cuda_calls_per_inference']:11.1f} "
              f"{m['cuda_lock_ops_per_inference']:14.1f} {m['lock_ops_per_inference']:12.1f} "
              f"{m['issue_us_mean']:14.1f} {m['issue_us_max']:13.1f}")
    for path in result["modes"]["eager"]["static_runtime"]:
        print(f"# {path} carries its own CUDA runtime: its calls are not counted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
