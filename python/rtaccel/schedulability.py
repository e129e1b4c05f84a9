"""Schedulability experiments of the PAAM paper (Sec. V-D, Fig. 14).

Random chainsets (4 callbacks per chain, one accelerator, UUniFast
utilisations, log-uniform periods, rate-monotonic priorities) are generated
and analyzed in C++; this module chooses the points, runs them on all cores and
writes the acceptance-ratio curves as CSV and PNG.

- ``vary="chains"``: the number of chains per set varies, accelerator:CPU
  utilisation 1:1 (Fig. 14a).
- ``vary="ratio"``: the accelerator:CPU utilisation ratio varies from 1:9 to
  7:3 at a fixed number of chains (Fig. 14b).

One curve per total utilisation of the set.
"""

from __future__ import annotations

import csv
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from rtaccel import _core

CHAIN_COUNTS = (2, 4, 6, 8, 10, 12, 14, 16, 18, 20)
RATIOS = ((1, 9), (2, 8), (3, 7), (4, 6), (5, 5), (6, 4), (7, 3))


@dataclass(frozen=True)
class Point:
    vary: str
    x: float          # number of chains, or accelerator share of the ratio (a of a:b)
    label: str
    utilization: float
    chains: int
    accel_to_cpu: float
    schedulable: int
    sets: int

    @property
    def ratio(self) -> float:
        return self.schedulable / self.sets if self.sets else 0.0


@dataclass
class Settings:
    sets: int = 1000
    seed: int = 1
    utilizations: tuple = (0.6, 0.8, 1.0, 1.2)
    chains: int = 8              # fixed number of chains when the ratio varies
    cores: int = 4
    shared_executors: bool = False  # one executor per core instead of one per chain
    priority_levels: int = 4
    preemption_cost_us: float = 50.0
    overhead_us: float = 50.0
    min_period_ms: float = 10.0
    max_period_ms: float = 1000.0
    jobs: int = 0                # 0: one thread per CPU


def _params(s: Settings, utilization: float, chains: int, accel_to_cpu: float):
    p = _core.ChainsetParams()
    p.chains = chains
    p.cores = s.cores
    p.executor_per_chain = not s.shared_executors
    p.utilization = utilization
    p.accel_to_cpu = accel_to_cpu
    p.priority_levels = s.priority_levels
    p.preemption_cost_ns = int(s.preemption_cost_us * 1000)
    p.overhead_ns = int(s.overhead_us * 1000)
    p.min_period_ns = int(s.min_period_ms * 1e6)
    p.max_period_ns = int(s.max_period_ms * 1e6)
    return p


def plan(vary: str, s: Settings):
    """The points of one experiment as (x, label, utilization, chains, accel_to_cpu)."""
    points = []
    for u in s.utilizations:
        if vary == "chains":
            for n in CHAIN_COUNTS:
                points.append((float(n), str(n), u, n, 1.0))
        elif vary == "ratio":
            for a, b in RATIOS:
                points.append((float(a), f"{a}:{b}", u, s.chains, a / b))
        else:
            raise ValueError(f"vary must be 'chains' or 'ratio', got {vary!r}")
    return points


def run(vary: str, s: Settings, progress=None) -> list[Point]:
    """Runs every point; each point has its own seed, so results do not depend on threading."""
    todo = plan(vary, s)

    def one(index_point):
        index, (x, label, u, n, r) = index_point
        ok, total = _core.acceptance(_params(s, u, n, r), s.sets, s.seed * 1_000_003 + index)
        return Point(vary, x, label, u, n, r, ok, total)

    jobs = s.jobs or os.cpu_count() or 1
    results = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for point in pool.map(one, enumerate(todo)):
            results.append(point)
            if progress:
                progress(point, len(results), len(todo))
    return results


def write_csv(points: list[Point], path: str) -> None:
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["vary", "x", "label", "utilization", "chains", "accel_to_cpu",
                      "schedulable", "sets", "acceptance_ratio"])
        for p in points:
            out.writerow([p.vary, p.x, p.label, p.utilization, p.chains, f"{p.accel_to_cpu:.4f}",
                          p.schedulable, p.sets, f"{p.ratio:.4f}"])


def plot(points: list[Point], path: str, s: Settings) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vary = points[0].vary
    fig, ax = plt.subplots(figsize=(6, 4))
    for u in sorted({p.utilization for p in points}):
        line = [p for p in points if p.utilization == u]
        ax.plot([p.x for p in line], [p.ratio for p in line], marker="o", label=f"U = {u:g}")
        ax.set_xticks([p.x for p in line], [p.label for p in line])
    if vary == "chains":
        ax.set_xlabel("chains per chainset (accelerator:CPU = 1:1)")
    else:
        ax.set_xlabel(f"accelerator:CPU utilisation ratio ({s.chains} chains)")
    ax.set_ylabel("schedulable chainsets")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"PAAM analysis, {s.sets} sets per point, {s.cores} cores + 1 accelerator")
    ax.grid(alpha=0.3)
    ax.legend(title="total utilisation")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def experiment(vary: str, s: Settings, out_dir: str, progress=None):
    """Runs one experiment and writes schedulability_<vary>.csv/.png; returns (points, seconds, paths)."""
    os.makedirs(out_dir, exist_ok=True)
    start = time.monotonic()
    points = run(vary, s, progress)
    seconds = time.monotonic() - start
    csv_path = os.path.join(out_dir, f"schedulability_{vary}.csv")
    png_path = os.path.join(out_dir, f"schedulability_{vary}.png")
    write_csv(points, csv_path)
    plot(points, png_path, s)
    return points, seconds, (csv_path, png_path)
