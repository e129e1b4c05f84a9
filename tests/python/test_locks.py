"""rtaccel shim / lockstat / lockdemo: the interposer's fixes measured against
the bad case in the same run, its traces, and its transparency."""

import contextlib
import fcntl
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import termios
import time

import pytest

import needs
from processes import command_of, wait_until

from conftest import ROOT

RTACCEL = [sys.executable, "-m", "rtaccel.cli"]
LIB = ROOT / "python" / "rtaccel" / "lib"
LOCKDEMO = LIB / "rtaccel-lockdemo"

pytestmark = needs.mark("build", not (LIB / "librtaccel_shim.so").exists(),
                        "librtaccel_shim.so not built (make build)")


def rtaccel(*args, **kw):
    env = kw.pop("env", dict(os.environ, PYTHONPATH=str(ROOT / "python")))
    return subprocess.run(RTACCEL + list(args), capture_output=True, text=True, env=env,
                          timeout=kw.pop("timeout", 120), **kw)


def lockdemo(scenario, *shim_flags, rounds=2):
    args = ["shim", *shim_flags, "--", str(LOCKDEMO), scenario, "--duration-ms", "500",
            "--hog-ms", "60", "--rounds", str(rounds)]
    r = rtaccel(*args)
    if r.returncode == 77:
        needs.skip("fifo", r.stderr.strip())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("scenario", ["reader-starvation", "writer-starvation"])
def test_phase_fair_ends_starvation(scenario):
    bad = lockdemo(scenario)
    fixed = lockdemo(scenario, "--phase-fair")
    print(scenario, bad, fixed)
    # Starved: the victim spends a large part of the 500 ms run waiting and gets
    # in a few times only. The starved side by its total, not its maximum or
    # median: a victim that got in twice has a meaningless median, and one
    # lucky gap moves a maximum. The fixed side by its longest wait, which
    # phase fairness bounds by one phase of the others. Not by its total: the
    # victim asks every 5 ms and then waits for the holder's core, so on a
    # loaded 2-core machine its total grows with the load and the times it got
    # in (57-67 entries, 71-188 ms in all, beside two busy loops).
    bad_wait_us = bad["mean_wait_us"] * bad["samples"]
    assert bad_wait_us > 150_000
    assert fixed["max_wait_us"] * 5 < bad_wait_us
    assert fixed["samples"] > 2 * max(bad["samples"], 1)


# Inversion: each round the hog runs 60 ms while the victim waits, unless
# the mechanism lets the lock holder finish first. Medians over five rounds,
# so that one round a host stall lengthens decides nothing.
def test_pi_bounds_mutex_inversion():
    bad = lockdemo("mutex-inversion", rounds=5)
    fixed = lockdemo("mutex-inversion", "--pi", rounds=5)
    print(bad, fixed)
    assert bad["p50_wait_us"] > 30_000          # the hog ran 60 ms per round
    assert fixed["p50_wait_us"] * 4 < bad["p50_wait_us"]


@pytest.mark.slow
def test_boost_bounds_rwlock_inversion_and_phase_fair_alone_does_not():
    bad = lockdemo("rwlock-inversion", rounds=5)
    fair_only = lockdemo("rwlock-inversion", "--phase-fair", rounds=5)
    fixed = lockdemo("rwlock-inversion", "--boost", rounds=5)
    print(bad, fair_only, fixed)
    assert bad["p50_wait_us"] > 30_000
    assert fair_only["p50_wait_us"] > 30_000    # fairness is no progress mechanism
    assert fixed["p50_wait_us"] * 4 < bad["p50_wait_us"]


def test_trace_summary_timeline_and_lockstat(tmp_path):
    r = rtaccel("shim", "--trace", "--out", str(tmp_path), "--", str(LOCKDEMO),
                "reader-starvation", "--duration-ms", "200")
    assert r.returncode == 0, r.stderr
    summaries = [p for p in tmp_path.glob("rtaccel-shim.*.json")
                 if not p.name.endswith(".trace.json")]
    assert len(summaries) == 1
    rep = json.loads(summaries[0].read_text())
    assert rep["format"] == "rtaccel-lockstat" and rep["version"] == 1
    assert rep["command"][0].endswith("rtaccel-lockdemo")
    rw = [l for l in rep["locks"] if l["kind"] == "rwlock"]
    assert len(rw) == 1
    lock = rw[0]
    assert lock["created_by"] == "init" and "rtaccel-lockdemo" in lock["created_at"]
    assert lock["contended"] > 0 and lock["wait_ns_max"] > 0
    assert lock["wait_ns_total"] >= lock["wait_ns_max"]
    assert sum(lock["wait_hist_log2_ns"]) == lock["contended"]
    assert sum(lock["hold_hist_log2_ns"]) == lock["acquisitions"]
    patterns = [p for p in rep["patterns"] if any(o["lock"] == lock["id"] for o in p["ops"])]
    assert {o["op"] for p in patterns for o in p["ops"]} >= {
        "rwlock_wrlock", "rwlock_rdlock", "rwlock_unlock"}
    timeline = json.loads(summaries[0].with_suffix(".trace.json").read_text())
    waits = [e for e in timeline["traceEvents"] if e.get("ph") == "X"]
    assert len(waits) == rep["wait_events"] and all(e["dur"] > 0 for e in waits)

    r = rtaccel("lockstat", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "rwlock" in r.stdout and "rwlock_wrlock#" in r.stdout


def test_a_command_line_that_is_not_utf8_leaves_reports_that_json_readers_take(tmp_path):
    # A file name in Latin-1 on the command line of a traced program. Before,
    # its bytes went into the report as they were, and lockstat (as any JSON
    # reader) refused the whole report.
    latin1 = os.fsdecode(b"caf\xe9.bin")
    r = rtaccel("shim", "--trace", "--out", str(tmp_path), "--", sys.executable, "-c",
                "import sys, threading; lock = threading.Lock(); lock.acquire(); lock.release()", latin1,
                "two words")
    assert r.returncode == 0, r.stderr
    report = next(p for p in tmp_path.glob("rtaccel-shim.*[0-9].json"))
    assert json.loads(report.read_bytes().decode("utf-8"))["command"][-2:] == ["caf\ufffd.bin", "two words"]
    json.loads(report.with_suffix(".trace.json").read_bytes().decode("utf-8"))
    r = rtaccel("lockstat", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "caf\ufffd.bin" in r.stdout
    assert " 'two words'" in r.stdout  # one argument, as a shell would read it back


def test_each_traced_run_has_a_folder_of_its_own(tmp_path):
    """Runs traced from one folder never mix: each writes a new folder under
    rtaccel-shim/ with its command and exit status, says where, and
    lockstat on rtaccel-shim/ reads the newest run alone, naming it."""
    first = rtaccel("shim", "--trace", "--", "ls", "/nonexistent", cwd=tmp_path)
    assert first.returncode == 2, first.stderr
    second = rtaccel("shim", "--trace", "--", str(LOCKDEMO), "reader-starvation",
                     "--duration-ms", "50", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    runs = sorted((tmp_path / "rtaccel-shim").iterdir(), key=lambda d: d.stat().st_mtime)
    assert [d.name.split("-", 2)[2] for d in runs] == ["ls", "rtaccel-lockdemo"]
    for run, result, status in zip(runs, (first, second), (2, 0)):
        meta = json.loads((run / "run.json").read_text())
        assert meta["format"] == "rtaccel-shim-run" and meta["exit_status"] == status
        assert meta["modes"] == ["trace"]
        assert f"1 process traced, in rtaccel-shim/{run.name}/" in result.stderr
        assert len(list(run.glob("rtaccel-shim.*[0-9].json"))) == 1

    newest = rtaccel("lockstat", "rtaccel-shim", cwd=tmp_path)
    assert newest.returncode == 0, newest.stderr
    assert "rtaccel-lockdemo" in newest.stdout and "ls /nonexistent" not in newest.stdout
    assert f"{runs[1].name}: the newest of 2 runs" in newest.stderr
    older = rtaccel("lockstat", str(runs[0]))
    assert older.returncode == 0 and "ls /nonexistent" in older.stdout

    again = rtaccel("shim", "--trace", "--out", str(runs[0]), "--", "true")
    assert again.returncode == 2 and "holds the traces of another run" in again.stderr


def test_lockstat_refuses_bad_files(tmp_path):
    bad = tmp_path / "rtaccel-shim.1.json"
    bad.write_text("{not json")
    r = rtaccel("lockstat", str(bad))
    assert r.returncode == 2 and "not valid JSON" in r.stderr
    bad.write_text('{"format": "other"}')
    r = rtaccel("lockstat", str(bad))
    assert r.returncode == 2 and "not an rtaccel lockstat file" in r.stderr
    r = rtaccel("lockstat", str(tmp_path / "missing"))
    assert r.returncode == 2


def test_shim_cli_errors_and_exit_status(tmp_path):
    assert rtaccel("shim", "--out", str(tmp_path)).returncode == 2
    assert rtaccel("shim", "--ceiling", "120", "--", "true").returncode == 2
    r = rtaccel("shim", "--out", str(tmp_path), "--", "/nonexistent/program")
    assert r.returncode == 127 and "command not found" in r.stderr
    assert rtaccel("shim", "--out", str(tmp_path), "--", "sh", "-c", "exit 7").returncode == 7


@pytest.mark.parametrize("flags", [[], ["--trace"]], ids=["plain", "trace"])
def test_the_shim_ends_as_its_program_did_and_passes_on_its_descriptors(tmp_path, flags):
    # Before, a traced program's end by signal N was an exit with status
    # 128+N, which a shell's loop does not stop on after a Ctrl-C; and the
    # program lost every descriptor past stderr: `rtaccel shim -- sort
    # <(cmd)` said "cannot read: /dev/fd/63", and a service manager's
    # sockets (LISTEN_FDS) were closed.
    out = tmp_path / "t"
    ended = rtaccel("shim", *flags, "--out", str(out), "--", "sh", "-c", "kill -USR1 $$")
    assert ended.returncode == -signal.SIGUSR1, ended.stderr
    if flags:
        assert json.loads((out / "run.json").read_text())["exit_status"] == 128 + signal.SIGUSR1
    given = tmp_path / "given"
    given.write_text("from the caller\n")
    with open(given) as f:
        fd = f.fileno()
        r = rtaccel("shim", *flags, "--out", str(tmp_path / "u"), "--", "cat", f"/dev/fd/{fd}",
                    pass_fds=(fd,))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "from the caller\n"


# A program that ends in its own time on SIGINT, SIGTERM or SIGHUP, as a ROS 2
# node does: it says it is ready, and on the first such signal cleans up for
# a second (longer than a wrapper's grace before SIGKILL), writes the signals
# it got meanwhile into ARGV[1]/got, and exits 3. With ARGV[2] "own-group",
# it first leaves its process group, and with it the terminal's foreground.
CLEANS_UP = """
import os, pathlib, signal, sys, time
got = []
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, lambda sig, _frame: got.append(sig))
if sys.argv[2:] == ["own-group"]:
    os.setpgid(0, 0)
folder = pathlib.Path(sys.argv[1])
(folder / "ready.new").write_text(str(os.getpid()))
(folder / "ready.new").rename(folder / "ready")
while not got:
    time.sleep(0.01)
time.sleep(1.0)
(folder / "got").write_text(" ".join(signal.Signals(s).name for s in got))
sys.exit(3)
"""


@contextlib.contextmanager
def cleaning_program_under_shim(tmp_path, flags, *program_args, **popen):
    """`rtaccel shim FLAGS -- CLEANS_UP` started in a session of its own:
    (the command, the run's folder) once the program is ready; the session
    and the program killed at the end."""
    out = tmp_path / "t"
    proc = subprocess.Popen(RTACCEL + ["shim", *flags, "--out", str(out), "--", sys.executable, "-c",
                                       CLEANS_UP, str(tmp_path), *program_args],
                            env=dict(os.environ, PYTHONPATH=str(ROOT / "python")), start_new_session=True,
                            **popen)
    try:
        assert wait_until((tmp_path / "ready").exists, 30), "the program did not start"
        yield proc, out
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            program = int((tmp_path / "ready").read_text())
            if CLEANS_UP in command_of(program):  # still it, in a group of its own
                os.kill(program, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("flags", [[], ["--trace"]], ids=["plain", "trace"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_sent_to_the_shim_reaches_its_program_which_ends_in_its_own_time(tmp_path, flags, sig):
    # ros2 launch ends a node with SIGINT to the process it started, a
    # service manager with SIGTERM. Before, the shim took them as its own
    # Ctrl-C: the program got nothing, was killed (SIGKILL) a quarter of a
    # second later, and wrote no report.
    with cleaning_program_under_shim(tmp_path, flags) as (proc, out):
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 3
    assert (tmp_path / "got").read_text() == sig.name
    if flags:
        assert json.loads((out / "run.json").read_text())["exit_status"] == 3
        reports = [json.loads(p.read_text()) for p in out.glob("rtaccel-shim.*[0-9].json")]
        assert [r["command"][0] for r in reports] == [sys.executable]


@contextlib.contextmanager
def on_a_terminal():
    """A pseudo-terminal: (its leader's descriptor, what to give Popen to run
    a program in its foreground, as its controlling terminal)."""
    leader, follower = pty.openpty()
    try:
        yield leader, dict(stdin=follower, stdout=follower, stderr=follower,
                           preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    finally:
        os.close(leader)
        os.close(follower)


def read_until(fd, text, seconds=10):
    """What FD gave until TEXT came, within SECONDS."""
    got = b""
    deadline = time.monotonic() + seconds
    while text not in got and select.select([fd], [], [], max(0, deadline - time.monotonic()))[0]:
        got += os.read(fd, 4096)
    assert text in got, got
    return got


@pytest.mark.parametrize("flags", [[], ["--trace"]], ids=["plain", "trace"])
def test_a_terminals_ctrl_c_ends_the_program_in_its_own_time(tmp_path, flags):
    with on_a_terminal() as (leader, terminal):
        with cleaning_program_under_shim(tmp_path, flags, **terminal) as (proc, _):
            os.write(leader, b"\x03")
            assert proc.wait(timeout=30) == 3  # what the shim writes, a line, fits the terminal
    assert (tmp_path / "got").read_text() == "SIGINT"


def test_the_shim_passes_on_a_signal_a_process_sent_it_not_one_the_terminal_sent_to_its_group(tmp_path):
    # The terminal sends Ctrl-C to its foreground process group, which the
    # program is in: passed on as well, it would get it twice (seen: "SIGINT
    # SIGINT" above). Here the program has left that group, so what the
    # shim passes on shows alone. (Untraced, the shim becomes the program.)
    with on_a_terminal() as (leader, terminal):
        with cleaning_program_under_shim(tmp_path, ["--trace"], "own-group", **terminal) as (proc, _):
            os.write(leader, b"\x03")
            read_until(leader, b"^C")  # echoed once the terminal sent SIGINT
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 3
    assert (tmp_path / "got").read_text() == "SIGTERM"


def test_an_interposer_whose_path_has_a_space_is_preloaded_and_one_with_a_colon_is_refused(tmp_path):
    # A virtualenv under "My Projects": the dynamic linker splits LD_PRELOAD
    # at spaces. Before, it refused the two halves of the path ("ERROR:
    # ld.so: object '.../my' from LD_PRELOAD cannot be preloaded"), and the
    # program ran without the interposer.
    for folder, traced in (("my lib", True), ("my:lib", False)):
        lib = tmp_path / folder / "librtaccel_shim.so"
        lib.parent.mkdir()
        shutil.copy(LIB / "librtaccel_shim.so", lib)
        out = tmp_path / f"t-{traced}"
        r = rtaccel("shim", "--trace", "--out", str(out), "--", sys.executable, "-c", "print('ran')",
                    env=dict(os.environ, PYTHONPATH=str(ROOT / "python"), RTACCEL_SHIM_LIB=str(lib)))
        if traced:
            assert r.returncode == 0 and r.stdout == "ran\n" and "ld.so" not in r.stderr, r.stderr
            assert "1 process traced" in r.stderr
        else:
            assert r.returncode == 3 and r.stdout == "", r.stderr
            assert "the interposer's path has a character the dynamic linker splits LD_PRELOAD at" in r.stderr


@needs.mark("setup", shutil.which("cc") is None, "no C compiler (cc)")
def test_a_statically_linked_program_is_said_to_run_without_the_interposer(tmp_path):
    # Before, `rtaccel shim --pi` ran a static program (a Go binary, a
    # static-pie tool) without the fix, and said nothing.
    source = tmp_path / "static.c"
    source.write_text("#include <pthread.h>\n#include <stdio.h>\n"
                      "int main(void) { pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\n"
                      "  pthread_mutex_lock(&m); pthread_mutex_unlock(&m); puts(\"ran\"); return 0; }\n")
    static = tmp_path / "static"
    subprocess.run(["cc", "-static", "-pthread", "-o", str(static), str(source)], check=True)
    for flags in ([], ["--pi"], ["--trace"]):
        out = tmp_path / ("t" + "".join(flags))
        r = rtaccel("shim", *flags, "--out", str(out), "--", str(static))
        assert r.returncode == 0 and r.stdout == "ran\n", r.stderr
        assert (f"rtaccel shim: {static} is linked statically, so no dynamic linker loads the interposer "
                "into it; it runs as it would without rtaccel shim") in r.stderr
    assert "0 processes traced" in r.stderr and "writes no report" in r.stderr
    # A program the interposer goes into is not named.
    r = rtaccel("shim", "--pi", "--", "true")
    assert r.returncode == 0 and "runs as it would" not in r.stderr


@needs.mark("root", os.geteuid() != 0, "makes a set-user-ID program of another user")
def test_a_program_that_gains_privileges_is_said_to_run_without_the_interposer(tmp_path):
    if os.statvfs(tmp_path).f_flag & os.ST_NOSUID:
        pytest.skip(f"{tmp_path} is on a nosuid file system")
    privileged = tmp_path / "privileged"
    shutil.copy(shutil.which("true"), privileged)
    os.chown(privileged, 65534, 65534)
    os.chmod(privileged, 0o4755)
    r = rtaccel("shim", "--trace", "--out", str(tmp_path / "t"), "--", str(privileged))
    assert r.returncode == 0, r.stderr
    assert f"{privileged} gains privileges as it starts" in r.stderr
    assert "0 processes traced" in r.stderr  # as said: the dynamic linker ignored LD_PRELOAD


MODES = [[], ["--trace"], ["--pi"], ["--phase-fair"], ["--boost"],
         ["--trace", "--pi", "--boost"]]


@pytest.mark.slow
@needs.mark("setup", shutil.which("xz") is None, "xz not installed (xz-utils)")
@pytest.mark.parametrize("flags", MODES, ids=lambda f: "+".join(f) or "none")
def test_transparent_for_multithreaded_xz(tmp_path, flags):
    data = tmp_path / "data"
    data.write_bytes(b"".join(b"%08d rtaccel phase-fair\n" % i for i in range(200_000)))
    ref = subprocess.run(["xz", "-T4", "-c", str(data)], capture_output=True, check=True).stdout
    r = subprocess.run(RTACCEL + ["shim", *flags, "--out", str(tmp_path / "t"), "--",
                                  "xz", "-T4", "-c", str(data)],
                       capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "python")),
                       timeout=120)
    assert r.returncode == 0
    assert r.stdout == ref


@pytest.mark.parametrize("flags", MODES[1:], ids=lambda f: "+".join(f))
def test_transparent_for_threaded_python(tmp_path, flags):
    program = ("import threading, queue\n"
               "q = queue.Queue(); out = []; lock = threading.Lock()\n"
               "def work():\n"
               "    while (item := q.get()) is not None:\n"
               "        with lock: out.append(item * item)\n"
               "ts = [threading.Thread(target=work) for _ in range(32)]\n"
               "[t.start() for t in ts]\n"
               "[q.put(i) for i in range(20000)]\n"
               "[q.put(None) for _ in ts]\n"
               "[t.join() for t in ts]\n"
               "print(len(out), sum(out))\n")
    ref = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    r = rtaccel("shim", *flags, "--out", str(tmp_path), "--", sys.executable, "-c", program)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ref.stdout


@pytest.mark.slow
def test_rtaccel_cli_tests_pass_under_the_shim(tmp_path):
    """rtaccel's own CLI test suite, run by a Python interpreter under the
    interposer with every fix on (Python's GIL and threading are pthread
    mutexes and condition variables)."""
    r = rtaccel("shim", "--trace", "--pi", "--boost", "--out", str(tmp_path), "--",
                sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                str(ROOT / "tests" / "python" / "test_cli.py"), timeout=300,
                cwd=str(ROOT / "tests" / "python"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert " passed" in r.stdout
    reports = [p for p in tmp_path.glob("rtaccel-shim.*.json") if ".trace" not in p.name]
    assert reports and any(json.loads(p.read_text())["locks"] for p in reports)
