"""How a Python test says that it could not run here: the rule of
tests/harness/skip.h, for pytest.

A skip names what the machine lacks (root, fifo, cores2, netns, cgroup2,
cpuset, memcg, qemu, seccomp, cuda, opencl, rdma, and here also ``build``:
a program or extension ``make build`` makes, and ``setup``: a package
tools/setup.sh installs). RTACCEL_TEST_REQUIRE lists, comma separated or ``all``, what the
machine running the suite is known to have; CI's does (.ci/run). There a
skip for one of them fails the test instead, so a green run never hides a
test that did not run.

    pytestmark = needs.mark("cores2", len(os.sched_getaffinity(0)) < 2, "the cpu backend needs two cores")
    ...
    if proc.returncode == 77:
        needs.skip("fifo", proc.stderr.strip())
"""

import os

import pytest


def required(need: str) -> bool:
    """Whether RTACCEL_TEST_REQUIRE says this machine has NEED."""
    listed = [n.strip() for n in os.environ.get("RTACCEL_TEST_REQUIRE", "").split(",")]
    return "all" in listed or need in listed


def skip(need: str, why: str):
    """Ends the test as skipped for want of NEED, or failed where NEED is required."""
    if required(need):
        pytest.fail(f"required {need}: {why} (RTACCEL_TEST_REQUIRE says this machine has it)",
                    pytrace=False)
    pytest.skip(f"needs {need}: {why}")


# What a program's own skip message (exit 77) says it lacks.
_REASONS = (("2 cores", "cores2"), ("two cores", "cores2"), ("SCHED_FIFO", "fifo"),
            ("cgroup", "cgroup2"), ("RDMA", "rdma"), ("namespace", "netns"), ("netns", "netns"),
            ("veth", "netns"), ("CUDA", "cuda"))


def skip_program(why: str, need: str | None = None):
    """skip() for a program that exited 77 saying WHY: for want of NEED, or
    of what WHY names."""
    if need is None:
        need = next((n for words, n in _REASONS if words in why), "unknown")
    skip(need, why)


def mark(need: str, missing: bool, why: str):
    """A marker: the test is skipped (or fails, where NEED is required) when
    MISSING is true. Acted on by harness.py before the test runs."""
    return pytest.mark.needs(need, missing, why)


def check_marks(item):
    for m in item.iter_markers("needs"):
        need, missing, why = m.args
        if missing:
            skip(need, why)
