"""The isolate layer from Python: join a gang and run jobs under the gang lock
(one real-time gang at a time across all cores, RT-Gang).

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

from contextlib import contextmanager

from rtaccel import _core


class Gang:
    """The calling thread's membership of gang ``name`` of gang lock ``lock``
    (created if it does not exist: /dev/shm/rtaccel-gang.LOCK)."""

    def __init__(self, lock: str, name: str, priority: int, threshold_mbps: int = 0):
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
