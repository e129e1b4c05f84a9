"""harness.py: what a test leaves behind fails it, and what a program
outside the suite makes while the test runs does not."""

import os
import pathlib
import subprocess
import sys
import time

import pytest

import needs

HERE = pathlib.Path(__file__).resolve().parent

# The first test waits while a process outside its pytest (this test's)
# makes shared memory; the second leaves its own behind.
SAMPLE = '''
import os
import pathlib
import time


def test_beside_another_process():
    pathlib.Path(os.environ["SAMPLE_READY"]).write_text("")
    other = pathlib.Path(os.environ["SAMPLE_OTHER"])
    for _ in range(600):
        if other.exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"{other} was never made")


def test_leaving_its_own():
    pathlib.Path(os.environ["SAMPLE_OWN"]).write_text("")
'''


@pytest.mark.root
@needs.mark("root", os.geteuid() != 0, "who made what is told by fanotify, which needs root")
def test_an_outsiders_shared_memory_is_kept_and_the_tests_own_is_not(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    tag = f"rtaccel-harness-test.{os.getpid()}"
    other = pathlib.Path(f"/dev/shm/{tag}.other")
    own = pathlib.Path(f"/dev/shm/{tag}.own")
    env = dict(os.environ, PYTHONPATH=str(HERE), SAMPLE_READY=str(tmp_path / "ready"),
               SAMPLE_OTHER=str(other), SAMPLE_OWN=str(own))
    sample = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                               "-p", "harness", str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists() and sample.poll() is None:
            assert time.monotonic() < deadline, "the sample's first test never started"
            time.sleep(0.05)
        # made by this test's process: outside the sample's pytest
        other.write_text("")
        out, _ = sample.communicate(timeout=120)
        assert "2 passed, 1 error" in out, out
        # Read from what the guard said, not from /dev/shm: a suite beside
        # this one whose guard judges by names alone may remove it meanwhile.
        assert f"left shm {other.name}" not in out, out
        assert f"shm {other.name} was made by process {os.getpid()}" in out, out
        assert f"test_leaving_its_own left shm {own.name} behind: removed" in out, out
        assert not own.exists()
    finally:
        if sample.poll() is None:
            sample.kill()
            sample.wait()
        other.unlink(missing_ok=True)
        own.unlink(missing_ok=True)
