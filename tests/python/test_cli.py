"""The rtaccel command line: its contract (tables, JSON, exit status, errors)."""

import csv
import json
import pathlib
import re
import subprocess
import sys

import needs
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


ENV = {"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin",
       # This machine's calibration must not change the results.
       "RTACCEL_CALIBRATION": "/nonexistent/calibration.json"}


def rtaccel(*args, check=None):
    proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, env=ENV)
    if check is not None:
        assert proc.returncode == check, proc.stdout + proc.stderr
    return proc


def test_analyze_prints_one_row_per_chain():
    out = rtaccel("analyze", str(EXAMPLES / "quickstart.yaml"), check=0).stdout
    rows = [line for line in out.splitlines() if line and not line.startswith("#")]
    assert rows[0].split()[:3] == ["chain", "prio", "crit"]
    assert rows[1].split()[0] == "hot" and "13140" in rows[1]  # Refinements.TogetherByDefault...
    assert "# all critical chains schedulable" in out


@pytest.mark.parametrize("calibration, message", [
    ("[]", "not a calibration written by `rtaccel calibrate`"),
    ('{"epsilon_us": 5}', "not a calibration written by `rtaccel calibrate`"),
    ('{"epsilon_us": "a", "kappa_us": 1, "release_jitter_us": 1}', "not a calibration"),
    ('{"epsilon_us": -5, "kappa_us": 1, "release_jitter_us": 1}', "epsilon_us is -5, not an overhead"),
    ('{"epsilon_us": 5, "kappa_us": 1e300, "release_jitter_us": 1}', "kappa_us is 1e+300, not an overhead"),
    ('{"epsilon_us": 5, "kappa_us": 1, "release_jitter_us": NaN}', "release_jitter_us is nan, not an overhead"),
    ('{"epsilon_us": 5, "kappa_us": 1, "release_jitter_us": 1, "link_kernel_ns_per_kb": Infinity}',
     "link_kernel_ns_per_kb is inf"),
    (pathlib.Path("/dev/zero"), "not a file (a device or a pipe?)"),  # not read for ever
])
def test_a_calibration_that_is_not_one_is_refused_with_what_is_wrong(tmp_path, calibration, message):
    if isinstance(calibration, pathlib.Path):
        (tmp_path / "calibration.json").symlink_to(calibration)
    else:
        (tmp_path / "calibration.json").write_text(calibration)
    proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", "analyze", str(EXAMPLES / "quickstart.yaml")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin",
                               "RTACCEL_CALIBRATION": str(tmp_path / "calibration.json")})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_analyze_prints_long_chain_names_whole(tmp_path):
    # Names that share the column's width of prefix must stay apart.
    text = (EXAMPLES / "quickstart.yaml").read_text()
    text = text.replace("{name: hot,", "{name: front_camera_object_detection_hot,")
    text = text.replace("{name: log,", "{name: front_camera_object_detection_log,")
    path = tmp_path / "long.yaml"
    path.write_text(text)
    out = rtaccel("analyze", str(path), check=0).stdout
    rows = [line.split() for line in out.splitlines() if line and not line.startswith("#")]
    assert [r[0] for r in rows] == ["chain", "front_camera_object_detection_hot",
                                    "front_camera_object_detection_log"], out
    assert len({len(r) for r in rows}) == 1, out  # every row has every column


def test_analyze_says_when_the_overheads_are_not_this_machines():
    out = rtaccel("analyze", str(EXAMPLES / "quickstart.yaml"), check=0).stdout
    assert ("# overheads: the workload's; this machine has no calibration at /nonexistent/calibration.json"
            in out), out
    quiet = rtaccel("analyze", str(EXAMPLES / "quickstart.yaml"), "--no-calibration", check=0).stdout
    assert "calibration" not in quiet
    doc = json.loads(rtaccel("analyze", str(EXAMPLES / "quickstart.yaml"), "--json", check=0).stdout)
    assert doc["options"]["uncalibrated"] == "/nonexistent/calibration.json"


def test_analyze_json_carries_the_contract_keys():
    doc = json.loads(rtaccel("analyze", str(EXAMPLES / "quickstart.yaml"), "--json", check=0).stdout)
    assert doc["format_version"] == 1
    assert doc["all_critical_schedulable"] is True
    hot = doc["chains"][0]
    assert {"wcrt_us", "deadline_us", "schedulable", "dominant", "breakdown"} <= hot.keys()
    assert hot["wcrt_us"] == pytest.approx(13140.0)
    assert sum(hot["breakdown"].values()) == pytest.approx(hot["wcrt_us"])


def test_unschedulable_critical_chain_exits_1(tmp_path):
    w = tmp_path / "late.yaml"
    w.write_text("""version: 1
name: late
executors: [{name: ex, core: 0, priority: 50}]
callbacks:
  - {name: a, executor: ex, trigger: {timer_ms: 10}, cpu_us: 2000}
  - {name: b, executor: ex, trigger: {timer_ms: 100}, cpu_us: 5000}
chains:
  - {name: A, priority: 2, path: [a]}
  - {name: B, priority: 1, path: [b], deadline_ms: 6}
""")
    proc = rtaccel("analyze", str(w), check=1)
    assert "exceeds the deadline" in proc.stdout
    doc = json.loads(rtaccel("analyze", str(w), "--json", check=1).stdout)
    assert doc["chains"][1]["wcrt_us"] == pytest.approx(7000.0)  # FailSafe.BoundPastTheDeadline...


def test_bad_workload_exits_2_with_file_line_col(tmp_path):
    w = tmp_path / "bad.yaml"
    w.write_text("version: 1\nname: bad\nexecutors: [{name: ex, core: 0, priority: 500}]\n"
                 "callbacks: [{name: a, executor: ex, trigger: {timer_ms: 10}, cpu_us: x}]\n"
                 "chains: [{name: A, priority: 1, path: [a]}]\n")
    proc = rtaccel("analyze", str(w), check=2)
    lines = proc.stderr.splitlines()
    assert lines[0].startswith(f"{w}:3:")
    assert "between 1 and 99" in lines[0]
    assert lines[1].startswith(f"{w}:4:") and "cpu_us must be a number" in lines[1]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("args", [
    ["analyze"],
    ["analyze", "x.yaml", "--horizon", "forever"],
    ["experiment", "schedulability", "--vary", "sideways"],
    ["experiment", "schedulability", "--vary", "chains", "--sets", "0"],
    ["experiment", "schedulability", "--vary", "chains", "--utilization", "a,b"],
    ["experiment", "schedulability", "--vary", "chains", "--utilization", "nan"],
    ["experiment", "schedulability", "--vary", "chains", "--kappa-us", "-1"],
    ["experiment", "schedulability", "--vary", "chains", "--epsilon-us", "inf"],
    ["experiment", "schedulability", "--vary", "chains", "--min-period-ms", "0"],
    ["experiment", "schedulability", "--vary", "chains", "--jobs", "-1"],
    ["frobnicate"],
    ["run", "x.yaml", "--best-effort", " "],
    ["bench", "net-overhead", "--chunk", "1"],
    ["bench", "net-overhead", "--chunk", "64K,1M"],
])
def test_bad_arguments_exit_2_without_traceback(args):
    proc = rtaccel(*args, check=2)
    assert "usage:" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_file_is_a_clean_error():
    proc = rtaccel("analyze", "/nonexistent.yaml", check=2)
    assert "/nonexistent.yaml: cannot open the file" in proc.stderr


def test_every_shipped_workload_is_schedulable():
    for name in ("quickstart", "paam_case_study_1", "autoware_reference", "partitioned_pipeline_memory"):
        out = rtaccel("analyze", str(EXAMPLES / f"{name}.yaml"), check=0).stdout
        assert f"workload '{name}'" in out and "NOT schedulable" not in out


@pytest.mark.slow
def test_demo_runs_the_three_policies_and_reports(tmp_path):
    # 1: paam's bound exceeded in two seconds on a noisy machine, not judged here.
    proc = rtaccel("demo", "--duration", "2", "--out", str(tmp_path), "--quiet")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    out = proc.stdout
    assert "ros2 p50" in out and "picas p50" in out and "paam p50" in out
    assert "hot_path_front: paam maximum" in out
    # This machine has no calibration (RTACCEL_CALIBRATION names none): the
    # demo measures one, and every run's bounds take at least its figures.
    measured = re.search(r"# this machine: epsilon ([\d.]+) us, kappa ([\d.]+) us, release jitter ([\d.]+) us", out)
    assert measured, out
    epsilon, kappa, jitter = map(float, measured.groups())
    # Unless the host ran so slow while it was measured that a chain had no
    # bound with them (test_demo_goes_on_with_the_workloads_overheads_...).
    if "the demo runs with the workload's own overheads instead" not in out:
        for policy in ("ros2", "picas", "paam"):
            summary = json.loads((tmp_path / policy / "summary.json").read_text())
            assert summary["epsilon_us"] >= epsilon - 0.05 and summary["kappa_us"] >= kappa - 0.05, summary
            assert summary["release_jitter_us"] >= jitter - 0.05, summary
    assert not pathlib.Path("/nonexistent/calibration.json").exists()
    assert (tmp_path / "report" / "cdf_hot_path_front.png").stat().st_size > 0


@pytest.mark.slow
def test_demo_goes_on_with_the_workloads_overheads_where_this_machines_leave_a_chain_without_a_bound(tmp_path):
    # A calibration taken while the host ran slow: an overhead of 5 ms per
    # request leaves the Autoware system's chains no bound, and the server
    # refuses them. The demo says so and shows the workload as declared.
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps({"format_version": 1, "epsilon_us": 5000.0, "kappa_us": 100.0,
                                       "release_jitter_us": 100.0, "link_kernel_ns_per_kb": 500}))
    proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", "demo", "--duration", "1", "--out",
                           str(tmp_path / "out"), "--quiet"], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin",
                               "RTACCEL_CALIBRATION": str(calibration)})
    # 1 after the report: paam's bound exceeded, which is not this test's;
    # before it, the second try refused too.
    assert proc.returncode in (0, 1) and "# report: " in proc.stdout, proc.stdout + proc.stderr
    assert "admission control finds no bound for a chain (above); the demo runs with the workload's own " \
        "overheads instead" in proc.stdout, proc.stdout
    assert "refused" in proc.stderr, proc.stderr
    declared = json.loads((tmp_path / "out" / "paam" / "summary.json").read_text())["epsilon_us"]
    assert declared < 5000, declared
    assert "paam p50" in proc.stdout


def test_schedulability_experiment_writes_csv_and_png(tmp_path):
    proc = rtaccel("experiment", "schedulability", "--vary", "ratio", "--sets", "30",
                   "--utilization", "0.5,1.5", "--out", str(tmp_path), "--quiet", check=0)
    assert "chainsets analyzed" in proc.stdout
    rows = list(csv.DictReader(open(tmp_path / "schedulability_ratio.csv")))
    assert len(rows) == 2 * 7
    assert {r["label"] for r in rows} == {"1:9", "2:8", "3:7", "4:6", "5:5", "6:4", "7:3"}
    assert all(int(r["sets"]) == 30 for r in rows)
    png = (tmp_path / "schedulability_ratio.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # A lighter load is never less schedulable than a heavier one at the same point.
    by = {(r["label"], float(r["utilization"])): float(r["acceptance_ratio"]) for r in rows}
    assert all(by[(label, 0.5)] >= by[(label, 1.5)] for label, _ in by)


def test_experiment_is_reproducible_from_its_seed():
    from rtaccel import _core

    p = _core.ChainsetParams()
    p.chains, p.utilization = 6, 1.0
    assert _core.acceptance(p, 50, 7) == _core.acceptance(p, 50, 7)
    assert _core.acceptance(p, 50, 7)[1] == 50


@pytest.mark.parametrize("stderr_too", [False, True], ids=["stdout", "stdout-and-stderr"])
def test_output_into_a_full_disk_is_one_line_and_exit_3_not_a_traceback_and_exit_1(stderr_too):
    # `rtaccel analyze ... > report.txt` on a full disk. Before: a
    # traceback, and exit 1, which says a critical chain misses.
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", "analyze", "examples/quickstart.yaml"],
                              stdout=full, stderr=full if stderr_too else subprocess.PIPE, text=True, cwd=ROOT,
                              env=ENV, timeout=60)
    assert proc.returncode == 3, proc.stderr
    if not stderr_too:
        assert proc.stderr == "rtaccel: cannot write its output: No space left on device\n"


def test_analysis_scale_bench_times_every_mode_and_saves_what_it_answered(tmp_path):
    """bench/analysis_scale.py: the workloads it makes load and are analysed
    in each mode; --save keeps each answer, for comparing two builds."""
    bench = [sys.executable, str(ROOT / "bench" / "analysis_scale.py")]
    proc = subprocess.run([*bench, "--registrations", "3", "--mixed", "4", "--repeat", "1", "--json",
                           "--save", str(tmp_path)], capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    modes = ["rtaccel", "paper", "deadline", "gang"]
    assert [(r["workload"], r["chains"], r["mode"]) for r in runs] == \
        [("registrations-3", 3, m) for m in modes] + [("mixed-4", 12, m) for m in modes]
    assert all(r["ms"] > 0 and 0 <= r["bounded"] <= r["chains"] for r in runs), runs
    # The registrations' chains have room: every one bounded in rtaccel's analysis.
    assert runs[0]["bounded"] == 3
    saved = json.loads((tmp_path / "mixed-4.rtaccel.json").read_text())
    assert len(saved) == 12 and all("wcrt_us" in c and "reason" in c for c in saved)
    assert len(list(tmp_path.glob("*.json"))) == 8
    for bad in ("0", "x", "3,501"):
        proc = subprocess.run([*bench, "--mixed", bad], capture_output=True, text=True, timeout=60, env=ENV)
        assert proc.returncode == 2 and "counts" in proc.stderr, (bad, proc.stderr)


def test_the_servers_admission_bounds_random_workloads_as_analyze_does(tmp_path):
    """rtaccel-server's admission control, told every chain as `rtaccel run`
    declares them (rtaccel_load_check --admission), gives each chain of 300
    random workloads the bound `rtaccel analyze` gives it, and refuses a
    workload exactly where a critical chain has none within its deadline.
    Before the topics were in a registration, it saw no fusion and no
    chain's own firings. Every third runs isolated: the regulator on the
    executors' core, the device's or both, which the server is told of as
    `rtaccel run` tells it."""
    check = ROOT / "build" / "rtaccel_load_check"
    if not check.exists():
        needs.skip("build", f"{check} not built")
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import random_runs
    finally:
        sys.path.pop(0)
    paths = []
    for seed in range(1, 301):
        paths.append(tmp_path / f"random-{seed}.yaml")
        text = random_runs.random_workload(seed)
        if seed % 3 == 0:
            cores = ("[0]", "[1]", "[0, 1]")[seed // 3 % 3]
            text += (f"isolation:\n  regulator: {{cores: {cores}, period_us: {1000 * (1 + seed % 2)}, "
                     f"be_peak_mbps: 10000, cost_us: {20 + seed % 50}}}\n")
        paths[-1].write_text(text)
    proc = subprocess.run([str(check), "--admission", *map(str, paths)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, "\n".join(line for line in proc.stdout.splitlines() if line.startswith("FAIL"))
    assert proc.stdout.rstrip().endswith("300 passed, 0 failed"), proc.stdout[-500:]
    # Both outcomes are there: the property is not met by refusing all.
    assert proc.stdout.count("admitted,") >= 100 and proc.stdout.count("refused, as") >= 50, proc.stdout[-500:]


@pytest.mark.slow
def test_random_runs_bench_makes_workloads_that_load_and_runs_the_schedulable_ones(tmp_path):
    """bench/random_runs.py: every workload it makes loads (a shape the
    loader refused would be dropped unseen as unschedulable), enough of them
    have bounds to be run, and a run's critical chains come back with their
    bound, maximum and unexplained count; --fusions keeps those with a
    fusion, --seeds runs the seeds named."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import random_runs
    finally:
        sys.path.pop(0)
    from rtaccel import analysis
    runnable = 0
    for seed in range(1, 41):
        path = tmp_path / f"w{seed}.yaml"
        path.write_text(random_runs.random_workload(seed))
        _, results = analysis.analyze_file(str(path))
        runnable += random_runs.schedulable(path, None)
    assert runnable >= 10, runnable
    bench = [sys.executable, str(ROOT / "bench" / "random_runs.py")]
    # Seed 6 makes no fusion, 7 one whose chains have bounds.
    proc = subprocess.run([*bench, "--seeds", "6,7", "--duration", "2", "--fusions", "--json",
                           "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode in (0, 1), proc.stderr
    result = json.loads(proc.stdout)
    assert result["tried"] == 2 and [r["seed"] for r in result["runs"]] == [7] and not result["failed"], result
    assert random_runs.FUSED in pathlib.Path(result["runs"][0]["workload"]).read_text()
    chains = result["runs"][0]["chains"]
    assert chains and all(c["wcrt_us"] > 0 and c["count"] > 0 and c["unexplained"] >= 0 for c in chains), chains
    assert result["unexplained"] == sum(c["unexplained"] for c in chains)
    proc = subprocess.run([*bench, "--count", "0"], capture_output=True, text=True, timeout=60, env=ENV)
    assert proc.returncode == 2 and "--count" in proc.stderr, proc.stderr
    proc = subprocess.run([*bench, "--seeds", "4,x"], capture_output=True, text=True, timeout=60, env=ENV)
    assert proc.returncode == 2 and "--seeds must be whole numbers" in proc.stderr, proc.stderr


def test_analyze_refuses_a_file_that_is_not_text(tmp_path):
    garbage = tmp_path / "garbage.yaml"
    garbage.write_bytes(b"chains:\n  - name: \xdd\xff\x00binary\n" + bytes(range(256)))
    proc = rtaccel("analyze", str(garbage), check=2)
    assert "Traceback" not in proc.stderr
    assert f"{garbage}:2:11: not UTF-8 text (byte 0xdd)" in proc.stderr


def test_analyze_names_a_file_whose_name_is_not_utf8(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", "analyze", b"/nonexistent/\xff.yaml"],
                          capture_output=True, cwd=ROOT, timeout=60,
                          env={"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert b"Traceback" not in proc.stderr and b"cannot open the file" in proc.stderr


def test_version_is_the_builds():
    version = (ROOT / "CMakeLists.txt").read_text().split("project(rtaccel VERSION ", 1)[1].split()[0]
    assert rtaccel("--version", check=0).stdout.strip() == f"rtaccel {version}"


def test_server_passes_its_arguments_to_the_daemon():
    # rtaccel server is rtaccel-server: its own usage and its own refusals.
    assert "--ready-fd" in rtaccel("server", "--help", check=0).stdout
    proc = rtaccel("server", "--levels", "99", check=2)
    assert "rtaccel-server: bad --levels (1..8) '99'" in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--regulated-cores", "1-"], "bad --regulated-cores (as 1,3-5) '1-'"),
    (["--regulated-cores", ""], "bad --regulated-cores (as 1,3-5) ''"),
    (["--regulator-period-us", "50"], "bad --regulator-period-us (100..1000000) '50'"),
    (["--regulator-cost-us", "-1"], "bad --regulator-cost-us (0..999999) '-1'"),
    (["--regulator-cost-us", "1000"], "bad --regulator-cost-us: 1000 us is not less than the period (1000 us)"),
    (["--regulator-period-us", "500", "--regulator-cost-us", "600"],
     "bad --regulator-cost-us: 600 us is not less than the period (500 us)"),
])
def test_the_server_refuses_a_regulator_it_could_not_bound_with_one_line(args, message):
    proc = rtaccel("server", "--socket", "/nonexistent/s.sock", *args, check=2)
    assert f"rtaccel-server: {message}" in proc.stderr, proc.stderr


def test_exit_statuses_are_the_ones_documented_for_the_command_and_its_programs():
    """errors.py and src/core/exit.h name the same statuses."""
    from rtaccel import errors
    header = (ROOT / "src" / "core" / "exit.h").read_text()
    for name, value in (("OK", 0), ("FAILS", 1), ("BAD_INPUT", 2), ("RUNTIME", 3), ("CANNOT_RUN_HERE", 77),
                        ("INTERRUPTED", 130)):
        assert f"RTACCEL_EXIT_{name} = {value}," in header
        assert getattr(errors, f"EXIT_{name}") == value


@pytest.mark.parametrize("args, status, message", [
    # bad input: a folder that is no run's result, a file that is no trace
    (["compare", "/"], 2, "not the result of `rtaccel run`"),
    (["experiment", "schedulability", "--vary", "chains", "--sets", "2", "--quiet", "--out", "/proc/rtaccel"], 2,
     "cannot write the results into /proc/rtaccel"),
    (["lockstat", str(EXAMPLES / "quickstart.yaml")], 2, "not valid JSON"),
    # a results folder that cannot be made: said before the work
    (["bench", "gang-synthetic", "--out", "/proc/rtaccel"], 2,
     "rtaccel bench gang-synthetic: cannot write the results into /proc/rtaccel: No such file or directory"),
    (["bench", "gang-dnn", "--out", "/proc/rtaccel"], 2, "cannot write the results into /proc/rtaccel"),
    (["bench", "bounds", "--out", str(EXAMPLES / "quickstart.yaml")], 2,
     f"cannot write the results into {EXAMPLES / 'quickstart.yaml'}: a file, not a folder"),
    (["demo", "--out", "/proc/rtaccel"], 2, "rtaccel demo: cannot write the results into /proc/rtaccel"),
    (["shim"], 2, "no command given"),
    (["bench", "bounds", "{tmp}/none.yaml"], 2, "cannot open the file"),
    # a device given for a file is not read for ever
    (["analyze", "/dev/zero"], 2, "/dev/zero: larger than 16 MB, which no workload is (a device or a pipe?)"),
    (["lockstat", "/dev/zero"], 2, "/dev/zero: cannot read: not a file (a device or a pipe?)"),
    # runtime failures: the server cannot be reached, or cannot start
    (["run", str(EXAMPLES / "quickstart.yaml"), "--socket", "/nonexistent/server.sock", "--duration", "1",
      "--quiet", "--out", "{tmp}/run"], 3, "cannot connect to rtaccel-server"),
    (["server", "--socket", "/proc/rtaccel-server.sock", "--no-fifo"], 3, "/proc/rtaccel-server.sock"),
])
def test_bad_input_exits_2_and_a_runtime_failure_exits_3(tmp_path, args, status, message):
    proc = rtaccel(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


# A paam run of a demo on a noisy machine, as its summary says it: a
# critical chain over its bound, each instance over it explained by the
# run's monitor (first the bound with the run's own times and what the
# machine lost, then the overruns, the most first), beside a ros2 run.
def summary_of(policy, max_us, over, **extra):
    hot = {"chain": "hot", "critical": True, "count": 400, "deadline_misses": 0, "drops": 0,
           "deadline_us": 100000.0, "wcrt_us": 13100.0, "p50_us": 9000.0, "p99_us": 12000.0, "max_us": max_us,
           "bound_held": over == 0, "over_bound": over}
    if policy == "paam" and over:
        hot |= {"explained_by": [
            "with the run's longest times in place of the declared ones the analysis bounds it at 16.0 ms, "
            "which covers every instance",
            "core 0 lost 1.2 ms to steal in the time of the instances over the bound",
            f"callback filter was kept off core 0 for up to 2.0 ms while it ran (steal, or a thread outside "
            f"the workload) in 30 instances of the {over} over the bound",
            f"callback sensor ran up to 2.1 ms of CPU against a WCET of 2.0 ms in 3 instances of the {over} "
            "over the bound"], "unexplained": 0, "unchecked": 0}
    return {"format_version": 1, "policy": policy, "workload": {"name": "w"}, "duration_s": 40.0,
            "realtime": True, "critical_bounds_held": over == 0, "chains": [hot], "assumptions": {}} | extra


def write_run(folder, summary):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "latency.csv").write_text("chain,release_us,latency_us\nhot,0,9000\n")
    return str(folder)


def test_compare_leads_with_the_ratios_and_says_in_proportion_how_far_a_bound_was_exceeded(tmp_path):
    paam = write_run(tmp_path / "paam", summary_of("paam", 15400.0, 45))
    ros2 = write_run(tmp_path / "ros2", summary_of("ros2", 30800.0, 200))
    r = rtaccel("compare", ros2, paam)
    lines = r.stdout.splitlines()
    # The comparison a demo exists to show comes before the table.
    assert lines[2] == "# hot: paam maximum -50% against ros2", lines
    assert lines[3].startswith("chain "), lines
    # How many, how far, and what broke: the top overrun, not the context.
    assert ("# paam: hot: 45 of 400 instances (11%) over its 13.1 ms bound, by up to 2.3 ms; each had an "
            "assumption of the analysis broken in its time (the most: callback filter was kept off core 0 for "
            "up to 2.0 ms") in r.stdout, r.stdout
    assert "# ros2: hot: 200 of 400 instances (50%) over its 13.1 ms bound, by up to 17.7 ms\n" in r.stdout, r.stdout
    assert "EXCEEDED" not in r.stdout, r.stdout


def test_a_run_without_real_time_priority_is_not_judged_by_its_bounds(tmp_path):
    paam = write_run(tmp_path / "paam", summary_of("paam", 15400.0, 45, realtime=False))
    r = rtaccel("compare", paam)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("# paam: executors ran without SCHED_FIFO (refused): no real-time priority, the bounds do not "
            "apply to this run (hot: 45 of 400 instances (11%) over its 13.1 ms bound, by up to 2.3 ms)") \
        in r.stdout, r.stdout
    assert "EXCEEDED" not in r.stdout and "each had an assumption" not in r.stdout, r.stdout


@pytest.mark.parametrize("summary, status", [
    (summary_of("paam", 12000.0, 0), 0),
    (summary_of("paam", 15400.0, 45), 1),
    (summary_of("paam", 15400.0, 45, realtime=False), 0),  # no bound applies
    (summary_of("ros2", 30800.0, 200), 0),  # the bound is paam's
], ids=["held", "exceeded", "not-realtime", "ros2"])
def test_run_compare_report_and_demo_exit_alike_on_the_same_results(tmp_path, monkeypatch, capsys,
                                                                    summary, status):
    from rtaccel import cli, runner
    write_run(tmp_path / "run", summary)
    assert cli.main(["compare", str(tmp_path / "run")]) == status
    assert cli.main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "plots")]) == status

    # run and demo as their runner leaves the same results, with status 0.
    def run(workload, policy, duration_s, out, **_):
        write_run(pathlib.Path(out), summary)
        return 0

    def demo(workload, duration_s, out, **_):
        run(workload, "paam", duration_s, out)
        return 0, [out]
    monkeypatch.setattr(runner, "run", run)
    monkeypatch.setattr(runner, "demo", demo)
    monkeypatch.setattr(runner, "load_calibration", lambda: {})
    parse = cli.build_parser().parse_args
    args = parse(["run", str(EXAMPLES / "quickstart.yaml"), "--out", str(tmp_path / "again"), "--quiet"])
    assert args.func(args) == status
    args = parse(["demo", "--out", str(tmp_path / "demo"), "--quiet"])
    assert args.func(args) == status
    capsys.readouterr()


def test_examples_lists_what_is_shipped_and_copies_it_without_overwriting(tmp_path):
    out = rtaccel("examples", check=0).stdout.splitlines()
    names = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
    assert [line.split()[0] for line in out[1:]] == names, out
    assert "quickstart                   The smallest useful rtaccel workload: a sensor chain that uses the..." \
        in out, out
    mine = tmp_path / "mine"
    r = rtaccel("examples", "--copy", str(mine), check=0)
    assert sorted(p.stem for p in mine.iterdir()) == names
    assert (mine / "quickstart.yaml").read_text() == (EXAMPLES / "quickstart.yaml").read_text()
    assert f"next: `rtaccel analyze {mine}/quickstart.yaml`" in r.stdout, r.stdout
    # A copy edited is the user's: a second copy refuses, and leaves it.
    (mine / "quickstart.yaml").write_text("mine")
    r = rtaccel("examples", "--copy", str(mine), check=2)
    assert f"rtaccel examples: {mine}/autoware_memory.yaml and {len(names) - 1} more already there: nothing " \
           "copied" in r.stderr, r.stderr
    assert (mine / "quickstart.yaml").read_text() == "mine"


@pytest.mark.parametrize("given", ["quickstart", "quickstart.yaml", "examples/quickstart.yaml"])
def test_a_workload_not_here_that_names_a_shipped_example_is_that_example(tmp_path, given):
    # Where the user stands (an installed rtaccel: outside the checkout),
    # there is no examples/.
    proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", "analyze", given], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60, env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"rtaccel: no {given} here: the shipped example {EXAMPLES / 'quickstart.yaml'}\n")
    assert "workload 'quickstart'" in proc.stdout
    # A file of that name here is the user's own, and wins.
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "quickstart.yaml").write_text((EXAMPLES / "quickstart.yaml").read_text()
                                                          .replace("name: quickstart", "name: mine"))
    proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", "analyze", "examples/quickstart.yaml"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60, env=ENV)
    assert "workload 'mine'" in proc.stdout and "shipped example" not in proc.stderr, proc.stderr
    # A name that is no example is refused as before.
    proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", "analyze", "nope.yaml"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=60, env=ENV)
    assert proc.returncode == 2 and "nope.yaml: cannot open the file" in proc.stderr, proc.stderr
