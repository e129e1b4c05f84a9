"""cgroups for a test, made and removed by it (root): a cpuset (the cores a
container's --cpuset-cpus leaves a program) and a memory limit (a
container's --memory)."""

import contextlib
import os
import pathlib
import time

import needs


@contextlib.contextmanager
def cpuset_of(cpus):
    """A cpuset cgroup that allows CPUS (as cpuset.cpus writes them), removed
    after: yields its file that a process writes its pid into to join it.
    In the cgroup v1 cpuset hierarchy, or in v2 where its root hands the
    cpuset controller down; the test is skipped elsewhere."""
    name = f"rtaccel-test-cpuset.{os.getpid()}"
    v1, v2 = pathlib.Path("/sys/fs/cgroup/cpuset"), pathlib.Path("/sys/fs/cgroup")
    handed_down = v2 / "cgroup.subtree_control"
    if (v1 / "cpuset.cpus").exists():
        group, mems = v1 / name, (v1 / "cpuset.mems").read_text().strip()
    elif handed_down.exists() and "cpuset" in handed_down.read_text().split():
        group, mems = v2 / name, None
    else:
        needs.skip("cpuset", "no cpuset cgroup to make: neither v1's hierarchy nor v2's controller handed down")
    _make(group, "cpuset")
    try:
        (group / "cpuset.cpus").write_text(cpus)
        if mems is not None:
            (group / "cpuset.mems").write_text(mems)
        yield group / "cgroup.procs"
    finally:
        _remove(group)


@contextlib.contextmanager
def memory_cgroup(limit):
    """A memory cgroup that holds its processes to LIMIT bytes, removed
    after: yields its file that a process writes its pid into to join it.
    In the cgroup v1 memory hierarchy, or in v2 where its root has the
    memory controller; the test is skipped elsewhere."""
    name = f"rtaccel-test-memory.{os.getpid()}"
    v1, v2 = pathlib.Path("/sys/fs/cgroup/memory"), pathlib.Path("/sys/fs/cgroup")
    if (v1 / "memory.limit_in_bytes").exists():
        group, limit_file = v1 / name, "memory.limit_in_bytes"
    elif (v2 / "cgroup.controllers").exists() and "memory" in (v2 / "cgroup.controllers").read_text().split():
        (v2 / "cgroup.subtree_control").write_text("+memory")
        group, limit_file = v2 / name, "memory.max"
    else:
        needs.skip("memcg", "no memory cgroup to make: neither v1's hierarchy nor v2's controller")
    _make(group, "memcg")
    try:
        (group / limit_file).write_text(str(limit))
        yield group / "cgroup.procs"
    finally:
        _remove(group)


def _make(group, need):
    """Makes GROUP, or skips the test for want of NEED."""
    try:
        group.mkdir()
    except OSError as err:
        needs.skip(need, f"cannot make the cgroup {group} ({err}; root makes one)")


def _remove(group):
    for _ in range(50):  # empty once its processes are reaped
        try:
            group.rmdir()
            break
        except OSError:
            time.sleep(0.1)
