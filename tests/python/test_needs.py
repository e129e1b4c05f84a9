"""needs.py: a test that cannot run here is a skip with its reason, and a
failure where RTACCEL_TEST_REQUIRE says the machine has what it lacks."""

import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent

SAMPLE = '''
import needs


@needs.mark("qemu", True, "this machine has no qemu")
def test_marked():
    pass


def test_called():
    needs.skip_program("rtaccel-regulator-bench: needs a writable cgroup2 hierarchy")
'''


@pytest.mark.parametrize("require, outcome", [(None, "2 skipped"), ("root,cores2", "2 skipped"),
                                              ("qemu,cgroup2", "1 failed, 1 error"),
                                              ("all", "1 failed, 1 error"),
                                              ("cgroup2", "1 failed, 1 skipped")])
def test_a_skip_fails_where_the_machine_must_have_what_it_lacks(tmp_path, require, outcome):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    env = {k: v for k, v in os.environ.items() if k != "RTACCEL_TEST_REQUIRE"}
    env["PYTHONPATH"] = str(HERE)
    if require:
        env["RTACCEL_TEST_REQUIRE"] = require
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsf", "-p", "no:cacheprovider",
                        "-p", "harness", str(tmp_path)], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120)
    assert outcome in r.stdout, r.stdout + r.stderr
    if require is None:
        assert "needs qemu: this machine has no qemu" in r.stdout
        assert "needs cgroup2: rtaccel-regulator-bench: needs a writable cgroup2" in r.stdout
    assert r.returncode == (0 if outcome == "2 skipped" else 1)
    if "error" in outcome:
        assert "required qemu: this machine has no qemu (RTACCEL_TEST_REQUIRE" in r.stdout
