"""Whether this process may use real-time priorities, why not, and the one
remedy rtaccel applies itself.

Containers and sandboxes often refuse SCHED_FIFO. The causes, in the order
the kernel checks them:

- without CAP_SYS_NICE, RLIMIT_RTPRIO caps the priority a process may ask for;
- seccomp may forbid sched_setscheduler outright;
- with RT group scheduling (CONFIG_RT_GROUP_SCHED), a task in a cgroup whose
  real-time budget is 0 gets EPERM whatever its capabilities. cgroup v2 has
  no file to give a cgroup such a budget; only the root cgroup has one
  (kernel.sched_rt_runtime_us). Root can move the process there: that is
  the remedy ``ensure()`` applies, and says so.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import resource
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

CGROUP2_ROOT = Path("/sys/fs/cgroup")
RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")
CAP_SYS_NICE = 23
NO_RT_NOTE = "no real-time priority: bounds do not apply"
# Set once the note is said: the programs started afterwards (rtaccel-exec,
# which says it where run alone) do not say it again.
NOTED_ENV = "RTACCEL_NO_RT_NOTED"


@dataclass
class Verdict:
    allowed: bool
    reason: str = ""
    grantable: bool = False  # root can move the process where it is allowed


def _try_fifo(priority: int = 1) -> OSError | None:
    """Asks for SCHED_FIFO and puts the old policy back at once."""
    try:
        old_policy, old_param = os.sched_getscheduler(0), os.sched_getparam(0)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        os.sched_setscheduler(0, old_policy, old_param)
        return None
    except OSError as err:
        return err


def _status_field(name: str) -> str:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _own_cgroup2() -> str | None:
    """This process's cgroup v2 path ("/..."), None without cgroup v2."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:]
    except OSError:
        pass
    return None


def _rt_group_sched() -> bool:
    """Whether the kernel has RT group scheduling (its cgroup v1 file, or the config)."""
    if any(p.exists() for p in (CGROUP2_ROOT / "cpu.rt_runtime_us",
                                CGROUP2_ROOT / "cpu" / "cpu.rt_runtime_us")):
        return True
    for config in (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}")):
        try:
            if config.suffix == ".gz":
                text = gzip.decompress(config.read_bytes()).decode()
            else:
                text = config.read_text()
            return "CONFIG_RT_GROUP_SCHED=y" in text
        except OSError:
            continue
    return False


def diagnose() -> Verdict:
    """Whether SCHED_FIFO is allowed here and, if not, why, in one line."""
    err = _try_fifo()
    if err is None:
        return Verdict(True)
    cap_eff = int(_status_field("CapEff") or "0", 16)
    has_nice = bool(cap_eff >> CAP_SYS_NICE & 1)
    soft, _hard = resource.getrlimit(resource.RLIMIT_RTPRIO)
    if _status_field("Seccomp") == "2":
        return Verdict(False, f"SCHED_FIFO refused ({err.strerror}); a seccomp filter may forbid it")
    if not has_nice and soft < 1:
        return Verdict(False, f"SCHED_FIFO refused: RLIMIT_RTPRIO is {soft} and the process lacks "
                              "CAP_SYS_NICE (raise it with `ulimit -r 99` or limits.conf, or run as root)")
    try:
        if int(RT_RUNTIME.read_text()) == 0:
            return Verdict(False, "SCHED_FIFO refused: kernel.sched_rt_runtime_us is 0 "
                                  "(no real-time budget on this machine)")
    except (OSError, ValueError):
        pass
    cgroup = _own_cgroup2()
    if cgroup not in (None, "/") and _rt_group_sched():
        can_move = os.geteuid() == 0 and os.access(CGROUP2_ROOT / "cgroup.procs", os.W_OK)
        return Verdict(False, f"SCHED_FIFO refused: this process's cgroup {cgroup} has no real-time "
                              "budget (the kernel has RT group scheduling, and cgroup v2 cannot give "
                              "a cgroup one)", grantable=can_move)
    return Verdict(False, f"SCHED_FIFO refused ({err.strerror}), cause not found")


def ensure(who: str = "rtaccel", quiet: bool = False, also: tuple[int, ...] = ()) -> Verdict:
    """Makes real-time priorities available where root can, and says so;
    otherwise says in one line why they are not and that bounds do not
    apply. Children started afterwards inherit the outcome, and so do the
    processes ALSO (a shell that asked for it) and theirs."""
    verdict = diagnose()
    if verdict.allowed:
        return verdict
    if verdict.grantable:
        try:
            for pid in (*also, os.getpid()):
                (CGROUP2_ROOT / "cgroup.procs").write_text(str(pid))
        except OSError as err:
            verdict.reason += f"; moving to the root cgroup failed: {err.strerror}"
        else:
            if _try_fifo() is None:
                if not quiet:
                    print(f"{who}: {verdict.reason}: moved this process to the root cgroup, which has "
                          "the machine's real-time budget", file=sys.stderr)
                return Verdict(True, verdict.reason + "; granted: moved to the root cgroup")
    if not quiet:
        print(f"{who}: {NO_RT_NOTE}: {verdict.reason}; critical work runs at the best priority "
              "allowed (nice -20 where it may)", file=sys.stderr)
        os.environ[NOTED_ENV] = "1"
    return verdict


@contextlib.contextmanager
def no_rt_throttling(who: str):
    """The kernel's real-time throttling off (kernel.sched_rt_runtime_us -1)
    for the block, and put back after it however it ends: a benchmark of
    SCHED_FIFO threads kept busy, which it would stop for 50 ms a second.
    Said on stderr. OSError, with what to do, where it cannot be set (root's)."""
    try:
        before = RT_RUNTIME.read_text().strip()
        RT_RUNTIME.write_text("-1\n")
    except OSError as err:
        raise OSError(err.errno, f"{who}: --no-rt-throttling: cannot set {RT_RUNTIME} "
                                 f"({err.strerror}; it needs root)") from None
    print(f"# {who}: {RT_RUNTIME} -1 for the run (was {before})", file=sys.stderr)
    # SIGTERM and SIGHUP would end the process without this block's finally:
    # as SystemExit they run it (from the main thread, the one signals reach;
    # a signal the process ignores, as under nohup, stays ignored)
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, _exit_on)
    try:
        yield
    finally:
        for sig in previous:  # a second one must not cut the write short
            signal.signal(sig, signal.SIG_IGN)
        RT_RUNTIME.write_text(before + "\n")
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exit_on(signum, frame):
    raise SystemExit(128 + signum)
