"""What every Python test gets from the harness (loaded by conftest.py).

As ctest's tests run under tests/harness/test_guard.c, every pytest test
here runs so that nothing of it outlives it: pytest is the child subreaper of
what the tests start, so a process a test abandons comes back to it rather
than to init; after each test, pass or fail, the guard ends what the test
left running and removes the shared memory, socket files, network namespaces,
interfaces and cgroups it made and left, and names them. A test that passed
but left something behind fails in its teardown. (pytest runs one test at a
time, so what pytest's own processes made during a test is the test's. As
root the guard's watcher, started once for the session, tells who made each
object: one that a program outside the suite made meanwhile is said, in the
test's output, and kept. Without root names alone judge, as the report's
header says.)

Markers: ``slow`` (over about ten seconds: ``make test`` runs it, ``make
check`` does not) and ``root`` (what needs root: namespaces, cgroups,
SCHED_FIFO; without it the test skips, saying why).

RTACCEL_TEST_FAIL_AFTER_MS=N makes every test fail N ms in, as the guard
does for ctest: how the clean-up after a failure is checked on purpose
(tools/repeat.sh --fail-after).
"""

import ctypes
import os
import pathlib
import signal
import subprocess
from multiprocessing import resource_tracker

import pytest

import needs

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUARD = ROOT / "build" / "rtaccel-test-guard"
PR_SET_CHILD_SUBREAPER = 36


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: over about ten seconds; make check leaves it out")
    config.addinivalue_line("markers", "root: needs root (namespaces, cgroups, SCHED_FIFO)")
    config.addinivalue_line("markers", "needs(need, missing, why): skipped, or failed where required "
                            "(needs.py)")
    if not GUARD.exists():
        raise pytest.UsageError(f"{GUARD} is missing: build the tests first (make build)")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise pytest.UsageError("prctl(PR_SET_CHILD_SUBREAPER): "
                                + os.strerror(ctypes.get_errno()))
    # multiprocessing's resource tracker, started by the first test that
    # spawns, serves the whole session: started now, it is the session's,
    # and the sweep after each test spares it.
    global RESOURCE_TRACKER
    resource_tracker.ensure_running()
    RESOURCE_TRACKER = getattr(resource_tracker._resource_tracker, "_pid", None)
    # lttng-ust, which rclpy loads, makes its wait files in /dev/shm the
    # first time a process of this user loads it, and keeps them for every
    # later one, as it is meant to: made now, they are the user's, not the
    # test's that happens to import rclpy first.
    try:
        import rclpy  # noqa: F401
    except ImportError:
        pass
    # The guard's watcher, for the session: it compares each test's named
    # objects, told by who made them, from the test's start to its end.
    global WATCHER, WATCH_NOTES
    WATCHER = subprocess.Popen([str(GUARD), "--watch", str(os.getpid())],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    _, WATCH_NOTES = _ask(None)


def pytest_unconfigure(config):
    if WATCHER:
        WATCHER.stdin.close()
        WATCHER.wait()


def pytest_sessionstart(session):
    # said once, under -q too: that names alone judge here, and why
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for note in WATCH_NOTES:
        if reporter:
            reporter.write_line(note)


RESOURCE_TRACKER = None
WATCHER = None
WATCH_NOTES = []


class FailedOnPurpose(Exception):
    """Raised into a test by RTACCEL_TEST_FAIL_AFTER_MS."""


def _guard(*args):
    return subprocess.run([str(GUARD), *args], capture_output=True, text=True)


def _ask(request):
    """The watcher's answer to REQUEST (None: the one it gives unasked): what
    a test left behind, and what it only notes."""
    if request is not None:
        WATCHER.stdin.write(request + "\n")
        WATCHER.stdin.flush()
    left, notes = [], []
    for line in WATCHER.stdout:
        if line == ".\n":
            return left, notes
        tag, _, message = line.rstrip("\n").partition(" ")
        (left if tag == "left" else notes).append(message)
    raise RuntimeError(f"{GUARD} --watch ended")


def _reap():
    """Collects the exit status of every child that ended (orphans that came
    back to pytest as their subreaper among them)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


@pytest.fixture(autouse=True)
def nothing_left_behind(request):
    _ask("mark")
    try:
        fail_ms = int(os.environ.get("RTACCEL_TEST_FAIL_AFTER_MS", "0") or 0)
        if fail_ms > 0:
            def fail(signum, frame):
                raise FailedOnPurpose(f"failing on purpose after {fail_ms} ms "
                                      "(RTACCEL_TEST_FAIL_AFTER_MS)")
            signal.signal(signal.SIGALRM, fail)
            signal.setitimer(signal.ITIMER_REAL, fail_ms / 1000.0)
        yield
        signal.setitimer(signal.ITIMER_REAL, 0)
        spare = [arg for pid in (RESOURCE_TRACKER, WATCHER.pid) if pid
                 for arg in ("--spare", str(pid))]
        swept = _guard("--sweep", str(os.getpid()), "--grace", "5000", *spare)
        _reap()
        left, notes = _ask("check " + request.node.name.replace("\n", " "))
        for note in notes:
            print(note)
        report = "\n".join([swept.stderr.replace(
            f"process {os.getpid()} left", f"{request.node.name} left").strip(), *left]).strip()
        if report:
            # Said in the output of a failed test too, where it explains
            # what its failure left; a test that passed fails for it.
            print(report)
            failed = getattr(request.node, "rtaccel_failed", False)
            if not failed:
                pytest.fail("the test left this behind (now removed):\n" + report,
                            pytrace=False)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def pytest_runtest_setup(item):
    needs.check_marks(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call" and outcome.get_result().failed:
        item.rtaccel_failed = True
