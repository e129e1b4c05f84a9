"""The isolate layer from Python: join a gang and run jobs under the gang lock
(one real-time gang at a time across all cores, RT-Gang), and hold the
bandwidth lock around critical work so that the regulator (``rtaccel isolate
regulate``) throttles best-effort cores meanwhile (BWLOCK++).

    from rtaccel.isolate import BandwidthLock

    bw = BandwidthLock("default", "detector", threshold_mbps=200)
    with bw.held():               # no system call
        run_inference(frame)

    from rtaccel.isolate import Gang

    gang = Gang("cell0", "dnn", priority=60, threshold_mbps=100)
    while running:
        frame = camera.read()
        with gang.job():          # waits while a higher gang runs
            detections = model(frame)

The calling thread becomes the member; call ``Gang`` in every thread that
does the gang's work. A higher gang stops a member with a signal whose
handler parks the thread, wherever it is, so a parked Python thread keeps the
GIL: put gangs of different priorities in different processes (threads of
one gang may share a process). Give member threads a real-time priority
yourself (``os.sched_setscheduler``) so that they also preempt best-effort
work.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

from rtaccel import _core

# What the locks take (include/rtaccel/isolate.h): names of letters, digits,
# '_', '-' and '.', the lock's up to 199 long, a gang's or holder's up to 31;
# priorities up to 99; any threshold of 32 bits but the one that means
# unlimited.
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
LOCK_NAME_MAX, MEMBER_NAME_MAX, PRIORITY_MAX, THRESHOLD_MAX = 199, 31, 99, 2**32 - 2


def _check_name(what: str, name, longest: int) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > longest:
        raise ValueError(f"{what} {name!r}: 1 to {longest} letters, digits, '_', '-' or '.'")


def _check_int(what: str, value, lowest: int, highest: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not lowest <= value <= highest:
        raise ValueError(f"{what} {value!r}: an integer of {lowest}..{highest}")


class Gang:
    """The calling thread's membership of gang ``name`` of gang lock ``lock``
    (created if it does not exist: /dev/shm/rtaccel-gang.LOCK)."""

    def __init__(self, lock: str, name: str, priority: int, threshold_mbps: int = 0):
        _check_name("gang lock", lock, LOCK_NAME_MAX)
        _check_name("gang", name, MEMBER_NAME_MAX)
        _check_int("priority", priority, 1, PRIORITY_MAX)
        _check_int("threshold_mbps", threshold_mbps, 0, THRESHOLD_MAX)
        self._lock = _core.GangLock(lock)
        self._lock.join(name, priority, threshold_mbps)
        self.lock_name = lock
        self.name = name
        self.priority = priority

    @contextmanager
    def job(self):
        """A job of the gang: entered when the gang may run, left when the
        block ends, even by an exception."""
        _core.gang_job_begin()
        try:
            yield self
        finally:
            _core.gang_job_end()

    def stats(self) -> dict:
        """The calling thread's jobs, waits, parks and time parked (ns)."""
        return _core.gang_self_stats()

    def status(self) -> dict:
        """The lock's running priority, threshold and thread counts."""
        return self._lock.status()

    def leave(self) -> None:
        _core.gang_leave()

    @staticmethod
    def unlink(lock: str) -> None:
        """Removes gang lock ``lock`` from /dev/shm."""
        _core.GangLock.unlink(lock)


class BandwidthLock:
    """A holder of bandwidth lock ``lock`` (/dev/shm/rtaccel-bwlock.LOCK,
    created if missing) that allows ``threshold_mbps`` of best-effort memory
    bandwidth per regulated core while held. With ``ceiling_priority`` the
    holding thread runs at SCHED_FIFO that priority while it holds it."""

    def __init__(self, lock: str, label: str, threshold_mbps: int, ceiling_priority: int = 0):
        _check_name("bandwidth lock", lock, LOCK_NAME_MAX)
        _check_name("holder", label, MEMBER_NAME_MAX)
        _check_int("threshold_mbps", threshold_mbps, 0, THRESHOLD_MAX)
        _check_int("ceiling_priority", ceiling_priority, 0, PRIORITY_MAX)
        self._lock = _core.BwLock(lock)
        self._holder = self._lock.holder(label, threshold_mbps, ceiling_priority)
        self.lock_name = lock

    def take(self) -> None:
        self._holder.take()

    def release(self) -> None:
        self._holder.release()

    @contextmanager
    def held(self):
        """Holds the lock for the block, released even by an exception."""
        self._holder.take()
        try:
            yield self
        finally:
            self._holder.release()

    def status(self) -> dict:
        """Threshold in force (None: unlimited), holders holding it, holders,
        takes since the lock was made, dead holders released."""
        return self._lock.status()

    def close(self) -> None:
        self._holder.close()

    @staticmethod
    def unlink(lock: str) -> None:
        _core.BwLock.unlink(lock)


def synthetic_figures(folder, window_ms: float = 120.0) -> list[str]:
    """The figures of ``rtaccel bench gang-synthetic --out FOLDER``, from the
    traces the benchmark wrote there: a timeline of the first ``window_ms`` of
    each co-scheduled phase (when each task's threads ran, per core, as the
    RT-Gang paper's Fig. 5) and the CDFs of the job execution times. Returns
    the PNG paths."""
    import json
    from pathlib import Path

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    folder = Path(folder)
    phases = {}
    for name in ("fifo", "gang"):
        events = json.loads((folder / f"gang_synthetic_{name}.json").read_text())["traceEvents"]
        phases[name] = [e for e in events if e.get("ph") == "X"]
    colours = {"tau1": "tab:blue", "tau2": "tab:orange"}
    titles = {"fifo": "plain SCHED_FIFO", "gang": "gang lock"}

    fig, axes = plt.subplots(2, 1, figsize=(8, 3.8), sharex=True)
    for ax, (name, events) in zip(axes, phases.items()):
        origin = min(e["ts"] for e in events)
        for e in events:
            if e["cat"] != "run" or (e["ts"] - origin) / 1000.0 > window_ms:
                continue
            ax.broken_barh([((e["ts"] - origin) / 1000.0, max(e["dur"], 1.0) / 1000.0)],
                           (1 - e["tid"] + 0.6, 0.8), color=colours[e["name"]])
        ax.set_yticks([0.6 + 0.4, 1.6 + 0.4], ["core 1", "core 0"])
        ax.set_xlim(0, window_ms)
        ax.set_title(titles[name], fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("time (ms); idle stretches ran the best-effort programs")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    axes[0].legend(handles, list(colours), loc="upper right", fontsize=8, ncol=2)
    fig.tight_layout()
    timeline = folder / "gang_synthetic_timeline.png"
    fig.savefig(timeline, dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for ax, task in zip(axes, colours):
        for name, events in phases.items():
            # A job's execution time: the CPU time of its longer thread.
            per_job: dict[str, float] = {}
            for e in events:
                if e["cat"] == "job" and e["pid"] == (1 if task == "tau1" else 2):
                    per_job[e["name"]] = max(per_job.get(e["name"], 0.0), e["args"]["cpu_us"] / 1000.0)
            x = np.sort(np.array(list(per_job.values())))
            if x.size:
                ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=titles[name])
        ax.set_title(task, fontsize=9)
        ax.set_xlabel("job execution time (ms)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("CDF")
    axes[1].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    cdf = folder / "gang_synthetic_cdf.png"
    fig.savefig(cdf, dpi=110)
    plt.close(fig)
    return [str(timeline), str(cdf)]
