"""rtaccel as a user without real-time privileges meets it: SCHED_FIFO and
memory locking refused (no CAP_SYS_NICE, RLIMIT_RTPRIO 0, no CAP_IPC_LOCK
and a small RLIMIT_MEMLOCK), a calibration file it may not read. Each
refusal is one clear line; the run goes on and is marked."""

import json
import os
import shutil
import subprocess
import sys

import pytest

import needs

from conftest import ROOT

RTACCEL = [sys.executable, "-m", "rtaccel.cli"]

pytestmark = [pytest.mark.root, needs.mark(
    "root", os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("prlimit"),
    "needs root, setpriv and prlimit to take the privileges away")]


def unprivileged(args, home, env_extra=None, timeout=120):
    """ARGS run by root stripped of what real-time work needs, and of the
    power to read what is not its own."""
    dropped = "-sys_nice,-ipc_lock,-dac_override,-dac_read_search,-sys_resource"
    cmd = ["setpriv", "--inh-caps=-all", f"--bounding-set={dropped}", "--",
           "prlimit", "--rtprio=0", "--memlock=8388608", "--", *args]
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(ROOT / "python"))
    env.pop("RTACCEL_CALIBRATION", None)
    env.update(env_extra or {})
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def test_the_refusal_and_its_cause_are_said(tmp_path):
    done = unprivileged([*RTACCEL, "realtime", "--json"], tmp_path)
    assert done.returncode == 1, done.stderr
    verdict = json.loads(done.stdout)
    assert verdict["allowed"] is False and verdict["granted"] is False
    assert "RLIMIT_RTPRIO is 0" in verdict["reason"], verdict


@pytest.mark.slow
def test_a_run_goes_on_without_real_time_priority_and_is_marked(tmp_path):
    out = tmp_path / "run"
    done = unprivileged([*RTACCEL, "run", str(ROOT / "examples" / "quickstart.yaml"),
                         "--duration", "1", "--out", str(out), "--quiet"], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "terminate called" not in done.stderr
    # One line, from the command, naming the refusal and its cause; the
    # runner it starts does not say it again.
    assert done.stderr.count("no real-time priority") == 1, done.stderr
    assert "bounds do not apply: SCHED_FIFO refused: RLIMIT_RTPRIO is 0" in done.stderr, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["realtime"] is False
    assert "bounds do not apply to this run" in done.stdout
    # the server, started without SCHED_FIFO workers, did not lock memory it may not
    assert "locking memory refused" in (out / "server.log").read_text()


def test_an_unreadable_calibration_is_a_clear_error(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "calibration.json").write_text("{}")
    locked.chmod(0)
    try:
        done = unprivileged([*RTACCEL, "analyze", str(ROOT / "examples" / "quickstart.yaml")],
                            tmp_path, {"RTACCEL_CALIBRATION": str(locked / "calibration.json")})
    finally:
        locked.chmod(0o700)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "cannot be read (Permission denied)" in done.stderr, done.stderr


def test_a_results_folder_it_may_not_write_is_refused_before_the_run(tmp_path):
    # A folder root made, named by a user without root: refused at once,
    # not after thirty seconds of a run whose results have nowhere to go.
    out = tmp_path / "roots"
    out.mkdir()
    out.chmod(0o555)
    try:
        done = unprivileged([*RTACCEL, "run", str(ROOT / "examples" / "quickstart.yaml"), "--duration", "30",
                             "--out", str(out), "--quiet"], tmp_path, timeout=20)
    finally:
        out.chmod(0o755)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot write the results into {out}: Permission denied" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not list(out.iterdir())


def test_the_server_benchmark_runs_at_normal_priority_and_says_so(tmp_path):
    done = unprivileged([*RTACCEL, "bench", "request-overhead", "--requests", "200", "--json"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "as with --no-fifo" in done.stderr
    assert "chrt" not in done.stderr
    assert json.loads(done.stdout)["phases"]["overhead"]["p50_us"] > 0


@pytest.mark.parametrize("args, status, message", [
    # what measures real-time threads refuses, with the reason
    (["calibrate"], 77, "cannot measure real-time threads' overheads here: SCHED_FIFO refused: RLIMIT_RTPRIO is 0"),
    (["bench", "gang-synthetic", "--duration", "1"], 77, "needs SCHED_FIFO (root or CAP_SYS_NICE)"),
    # said before the three runs that need no privilege, not after them
    (["demo", "--isolation", "--duration", "1", "--out", "{tmp}/demo"], 3,
     "--isolation: the regulator needs SCHED_FIFO and perf events (root)"),
])
def test_what_needs_real_time_priority_refuses_at_once(tmp_path, args, status, message):
    done = unprivileged([*RTACCEL, *[a.replace("{tmp}", str(tmp_path)) for a in args]], tmp_path, timeout=30)
    assert done.returncode == status, done.stdout + done.stderr
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "demo").exists()
    assert not (tmp_path / ".config" / "rtaccel" / "calibration.json").exists()
