"""The processes a test started, as /proc shows them: for tests that kill a
run's processes and check what is left."""

import os
import pathlib
import re
import signal
import time


def children_of(pid):
    """The pids of the processes whose parent is PID."""
    out = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def command_of(pid):
    """PID's command line, its arguments joined by spaces; "" for one that
    is gone or has ended (a zombie has none)."""
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def state_of(pid):
    """PID's state as /proc shows it ("R", "S", "T" for stopped, "Z" for a
    zombie, ...); "" for one that is gone."""
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def ignored_signals(status_text):
    """The signals that a /proc/PID/status text's SigIgn line says its
    process ignores."""
    mask = int(re.search(r"^SigIgn:\s*([0-9a-f]+)$", status_text, re.M).group(1), 16)
    return {sig for sig in signal.Signals if mask >> (sig - 1) & 1}


def alive(pid):
    """Whether PID runs: a zombie has ended."""
    return state_of(pid) not in ("", "Z")


def wait_gone(pids, seconds=5.0):
    """Those of PIDS still alive after up to SECONDS."""
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def wait_until(condition, seconds=5.0):
    """Whether CONDITION() came true within SECONDS."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def end_left(proc, *pids):
    """What a failed test leaves: PROC (a Popen) killed and reaped where it
    runs still, and each of PIDS (None: not known yet) killed."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in pids:
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
