"""rtaccel run: executors, policies, topics, the accelerator queue and clean
shutdown, checked on short runs of small workloads. Properties are compared
against the bad case with wide margins so that a noisy machine cannot flip
them; the long runs and their figures are in docs/benchmarks.md."""

import contextlib
import fcntl
import json
import mmap
import os
import pathlib
import pty
import re
import resource
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import time

import needs
import pytest
import summaries
import trace_format
from cgroups import cpuset_of
from processes import alive, children_of, command_of, end_left, ignored_signals, state_of, wait_gone, wait_until
from rtaccel._core import percentile
from rtaccel.runner import run_labels, stops_line

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXEC = ROOT / "python" / "rtaccel" / "lib" / "rtaccel-exec"
ENV = {"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin",
       "RTACCEL_CALIBRATION": "/nonexistent/calibration.json"}

pytestmark = needs.mark("cores2", len(os.sched_getaffinity(0)) < 2,
                        "rtaccel run needs two cores: one is the accelerator")

# Timers on this 2-core VM wake up to about 1 ms late at worst: the analysis
# must know (rtaccel calibrate measures the p99 for the shipped examples).
HEAD = """version: 1
name: {name}
platform:
  release_jitter_us: 1000
  accelerators:
    - {{name: acc0, backend: cpu, core: 1, priority_levels: 2, preemption_cost_us: 100}}
server: {{core: 1, overhead_us: 50}}
"""


def one_timer_chain(timer_ms, cpu_us):
    """One executor on core 0 with one timer callback `t`, a chain of its own."""
    return f"""executors:
  - {{name: ex, core: 0, priority: 50}}
callbacks:
  - {{name: t, executor: ex, trigger: {{timer_ms: {timer_ms}}}, cpu_us: {cpu_us}}}
chains:
  - {{name: t, priority: 9, path: [t]}}
"""


def one_segment_chain(service, timer_ms):
    """One executor on core 0 with one timer callback `a` that calls SERVICE
    on acc0, a chain of its own."""
    return f"""executors:
  - {{name: ex, core: 0, priority: 50}}
callbacks:
  - {{name: a, executor: ex, trigger: {{timer_ms: {timer_ms}}}, cpu_us: 1000, segments: [{{accelerator: acc0, service: {service}, wcet_us: 500}}]}}
chains:
  - {{name: a, priority: 2, path: [a]}}
"""


def workload(tmp_path, name, body):
    path = tmp_path / f"{name}.yaml"
    path.write_text(HEAD.format(name=name) + body)
    return str(path)


# What a paam run exits with where the test does not judge its bounds: 1
# says a critical chain went over its bound, which a noisy machine can make.
RAN = (0, 1)


def rtaccel(*args, check=None, preexec_fn=None):
    """CHECK: the exit status required, or a tuple of those allowed."""
    proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, env=ENV, preexec_fn=preexec_fn)
    if check is not None:
        assert proc.returncode in (check if isinstance(check, tuple) else (check,)), proc.stdout + proc.stderr
    return proc


def run(path, policy, out, duration=2):
    rtaccel("run", path, "--policy", policy, "--duration", str(duration), "--out", str(out),
            "--quiet", check=RAN if policy == "paam" else 0)
    summaries.check(out / "summary.json")
    summary = json.loads((out / "summary.json").read_text())
    return summary, {c["chain"]: c for c in summary["chains"]}


TWO_TIMERS = """executors:
  - {name: ex, core: 0, priority: 50}
callbacks:
  # Registered first, least critical: both timers release together every 20 ms.
  - {name: low, executor: ex, trigger: {timer_ms: 20}, cpu_us: 2000}
  - {name: high, executor: ex, trigger: {timer_ms: 20}, cpu_us: 2000}
chains:
  - {name: low, priority: 1, path: [low]}
  - {name: high, priority: 9, path: [high]}
"""


@pytest.mark.slow
def test_ros2_runs_a_snapshot_in_registration_order_picas_by_priority(tmp_path):
    path = workload(tmp_path, "two_timers", TWO_TIMERS)
    _, ros2 = run(path, "ros2", tmp_path / "ros2")
    _, picas = run(path, "picas", tmp_path / "picas")
    # Each activation takes 1.8 ms of CPU: the one run second ends about 3.6 ms
    # after the release, the first about 1.8 ms.
    assert ros2["high"]["p50_us"] > 1.5 * ros2["low"]["p50_us"]
    assert picas["low"]["p50_us"] > 1.5 * picas["high"]["p50_us"]


# head publishes to a and c, both on ex2 above head's ex0 on core 0; a's
# topic wakes b, 5 ms, on ex1 between them. a is registered first, so its
# message goes out first. Were ex2 woken by a's message alone, it would run
# a at once, a would wake b, and c's message would wait in ex0, below b,
# for 5 ms. Woken once both are in, ex2 runs c, of the more critical chain,
# first.
FANOUT = """executors:
  - {name: ex0, core: 0, priority: 50}
  - {name: ex1, core: 0, priority: 51}
  - {name: ex2, core: 0, priority: 52}
callbacks:
  - {name: head, executor: ex0, trigger: {timer_ms: 50}, publishes: th, cpu_us: 300}
  - {name: a, executor: ex2, trigger: {topic: th}, publishes: ta, cpu_us: 300}
  - {name: b, executor: ex1, trigger: {topic: ta}, cpu_us: 5000}
  - {name: c, executor: ex2, trigger: {topic: th}, cpu_us: 300}
chains:
  - {name: L, priority: 1, path: [head, a, b]}
  - {name: H, priority: 9, path: [head, c]}
"""


def callback_spans(out, *names):
    """Each named callback's runs in the run's trace: (begin, end) in us."""
    spans = {name: [] for name in names}
    for e in json.loads((out / "trace.json").read_text())["traceEvents"]:
        if e.get("cat") == "callback" and e["name"] in spans:
            spans[e["name"]].append((e["ts"], e["ts"] + e["dur"]))
    return spans


@pytest.mark.slow
def test_a_publish_wakes_its_subscribers_once_every_message_is_in(tmp_path):
    path = workload(tmp_path, "fanout", FANOUT)
    _, chains = run(path, "paam", tmp_path / "out")
    spans = callback_spans(tmp_path / "out", "head", "a", "c")
    assert len(spans["head"]) >= 20
    for release, _ in spans["head"]:
        a = min(begin for begin, _ in spans["a"] if begin >= release)
        c = min(begin for begin, _ in spans["c"] if begin >= release)
        assert c < a, f"c started after a in the activation from {release} us"
    assert chains["H"]["p50_us"] < 2500  # head and c, not b's 5 ms


# front's fusion waits for rear's message, 20 ms of CPU work on an executor
# below front's. rear calls no accelerator and registers nothing with the
# server: before the runner declared every chain, the server's admission saw
# front alone, with no fusion to wait at, and admitted it with a 10 ms
# deadline that every instance missed.
FUSION = """executors:
  - {{name: ex_front, core: 0, priority: 60}}
  - {{name: ex_rear, core: 0, priority: 50}}
callbacks:
  - {{name: front, executor: ex_front, trigger: {{timer_ms: 100}}, publishes: F, cpu_us: 500,
     segments: [{{accelerator: acc0, service: busy, wcet_us: 500}}]}}
  - {{name: rear, executor: ex_rear, trigger: {{timer_ms: 100}}, publishes: R, cpu_us: 20000}}
  - {{name: fusion, executor: ex_front, trigger: {{topics: [F, R]}}, cpu_us: 500,
     segments: [{{accelerator: acc0, service: busy, wcet_us: 500}}]}}
chains:
  - {{name: front, priority: 9, path: [front, fusion], deadline_ms: {deadline_ms}}}
  - {{name: rear, priority: 1, path: [rear, fusion], critical: false}}
"""


@pytest.mark.slow
def test_paam_admits_a_chain_through_a_fusion_with_its_wait_or_not_at_all(tmp_path):
    tight = workload(tmp_path, "fusion_tight", FUSION.format(deadline_ms=10))
    proc = rtaccel("run", tight, "--policy", "paam", "--duration", "1", "--out", str(tmp_path / "tight"))
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert re.search(r"rtaccel-server refused the workload's chains: chain 'front': bound [\d.]+ ms exceeds "
                     r"deadline 10\.000 ms", proc.stderr), proc.stderr
    _, chains = run(workload(tmp_path, "fusion", FUSION.format(deadline_ms=100)), "paam", tmp_path / "out")
    front = chains["front"]
    assert front["wcrt_us"] >= 20000, front  # the wait for rear's 20 ms
    assert front["p50_us"] >= 15000, front  # which every instance has
    assert front["over_bound"] == 0 or front["unexplained"] == 0, front


# The same with c on ex2 and a on ex3, both above ex0: woken first, ex3
# runs a, whose topic wakes b on ex1, above ex0. Had ex0 not yet woken
# ex2, c would wait for b. The publisher wakes both at ex3's priority.
FANOUT_ABOVE = FANOUT.replace("  - {name: ex2, core: 0, priority: 52}",
                              "  - {name: ex2, core: 0, priority: 52}\n  - {name: ex3, core: 0, priority: 53}") \
                     .replace("{name: a, executor: ex2", "{name: a, executor: ex3")


@pytest.mark.slow
@needs.mark("root", os.geteuid() != 0, "the publisher takes a higher SCHED_FIFO priority while it wakes")
def test_a_publisher_wakes_two_executors_above_it_on_its_core_before_either_runs(tmp_path):
    path = workload(tmp_path, "fanout_above", FANOUT_ABOVE)
    _, chains = run(path, "paam", tmp_path / "out")
    spans = callback_spans(tmp_path / "out", "head", "b", "c")
    assert len(spans["head"]) >= 20
    for release, _ in spans["head"]:
        c = min(begin for begin, _ in spans["c"] if begin >= release)
        b_end = min(end for begin, end in spans["b"] if begin >= release)
        assert c < b_end, f"c waited for b in the activation from {release} us"
    assert chains["H"]["p50_us"] < 2500


@pytest.mark.slow
def test_timers_fire_at_their_period(tmp_path):
    path = workload(tmp_path, "two_timers", TWO_TIMERS)
    summary, _ = run(path, "picas", tmp_path / "out")
    seconds = summary["duration_s"]
    for timer in summary["timers"]:
        assert timer["period_us"] == 20000
        # Released at absolute times: a timer that slept a period after each
        # 2 ms callback would drift, firing 10-20% fewer times.
        assert abs(timer["activations"] - seconds / 0.020) <= 3
        # The median release within the jitter the workload declares to the
        # analysis (1 ms): host stalls move the tail, and the tail is the
        # long runs' to measure (docs/benchmarks.md), not a 2 s test's.
        assert 0 <= timer["jitter_p50_us"] <= 1000
        assert timer["jitter_p50_us"] <= timer["jitter_p90_us"] <= timer["jitter_p99_us"]


@pytest.mark.slow
def test_a_full_queue_drops_the_oldest_and_counts_it(tmp_path):
    path = workload(tmp_path, "drops", """executors:
  - {name: fast, core: 0, priority: 60}
  - {name: slow, core: 0, priority: 50}
callbacks:
  - {name: src, executor: fast, trigger: {timer_ms: 5}, publishes: t, cpu_us: 100}
  - {name: sink, executor: slow, trigger: {topic: t}, cpu_us: 20000}
chains:
  - {name: c, priority: 5, path: [src, sink], critical: false}
""")
    summary, chains = run(path, "picas", tmp_path / "out")
    queue = summary["queues"][0]
    src = summary["timers"][0]
    # 200 messages a second, 50 consumed at most: most are dropped.
    assert queue["messages"] == src["activations"]
    assert queue["dropped"] > queue["messages"] / 2
    assert chains["c"]["drops"] == queue["dropped"]
    # Every message is consumed, dropped, or still queued (at most 10) or in hand.
    assert 0 <= queue["messages"] - queue["dropped"] - chains["c"]["count"] <= 11


ACCEL = """executors:
  - {name: hi, core: 0, priority: 60}
  - {name: lo, core: 0, priority: 50}
callbacks:
  - {name: h, executor: hi, trigger: {timer_ms: 30}, cpu_us: 500, segments: [{accelerator: acc0, service: busy, wcet_us: 2000}]}
  - {name: l, executor: lo, trigger: {timer_ms: 13}, cpu_us: 200, segments: [{accelerator: acc0, service: busy, wcet_us: 10000}]}
chains:
  - {name: h, priority: 9, path: [h]}
  - {name: l, priority: 1, path: [l], critical: false}
"""


def segment_events(folder, name):
    trace = json.loads((folder / "trace.json").read_text())["traceEvents"]
    return trace, [e for e in trace if e.get("cat") == "segment" and e["name"] == name]


BIG_INPUT = """executors:
  - {name: ex, core: 0, priority: 50}
callbacks:
  # vecadd sized to 54 ms: its request reaches the 64 MiB buffer limit
  - {name: mover, executor: ex, trigger: {timer_ms: 150}, cpu_us: 200,
     segments: [{accelerator: acc0, service: vecadd, wcet_us: 60000}]}
chains:
  - {name: m, priority: 5, path: [mover]}
"""


def region_copy_ms(size):
    """What copying SIZE bytes into a shared region takes here, its pages in
    place (the executors lock their memory): what the first call used to pay."""
    data = os.urandom(1 << 20) * (size >> 20)
    fd = os.memfd_create("rtaccel-test")
    try:
        os.ftruncate(fd, size)
        with mmap.mmap(fd, size) as region:
            region[:] = bytes(size)
            start = time.perf_counter()
            region[:] = data
            return (time.perf_counter() - start) * 1e3
    finally:
        os.close(fd)


@pytest.mark.slow
def test_a_segments_input_is_in_its_buffer_before_the_first_instance(tmp_path):
    out = tmp_path / "out"
    run(workload(tmp_path, "big", BIG_INPUT), "paam", out, duration=1)
    trace, segments = segment_events(out, "mover: vecadd")
    callbacks = sorted((e for e in trace if e.get("cat") == "callback" and e["name"] == "mover"),
                       key=lambda e: e["ts"])
    segments.sort(key=lambda e: e["ts"])
    assert len(callbacks) >= 5 and len(segments) == len(callbacks)
    # The callback's CPU time: its 0.2 ms of work in every instance; the
    # first one no longer copies the input into the region. CPU time, not
    # the wall time from its start to its request, which the host's steal
    # in that one instance would stretch.
    cpu_ms = [c["args"]["cpu_us"] / 1e3 for c in callbacks]
    # Copying at the first call took it 14.5 ms here, beside 0.2 ms now.
    copy_ms = region_copy_ms(64 << 20)
    assert cpu_ms[0] < max(cpu_ms[1:]) + copy_ms / 2, (cpu_ms, copy_ms)


TWICE = """executors:
  - {name: ex, core: 0, priority: 50}
callbacks:
  # two segments of one service: the second's input goes into the buffer again
  - {name: twice, executor: ex, trigger: {timer_ms: 100}, cpu_us: 500,
     segments: [{accelerator: acc0, service: vecadd, wcet_us: 4000},
                {accelerator: acc0, service: vecadd, wcet_us: 4000}]}
chains:
  - {name: t, priority: 5, path: [twice]}
"""


@pytest.mark.slow
def test_an_input_copied_in_again_is_the_callbacks_cpu_time(tmp_path):
    summary, _ = run(workload(tmp_path, "twice", TWICE), "paam", tmp_path / "out", duration=1)
    a = summary["assumptions"]
    cpu, = a["callbacks"]
    off, = a["off_core"]
    # The copies (MiB each, milliseconds here) are the callback's CPU work,
    # over its 0.5 ms WCET, not time "kept off its core": were they counted
    # off core, every instance would show one. The fewest, since the host
    # may take the core for milliseconds in any one instance (21 ms of 130
    # ms of steal was seen in one here).
    assert cpu["min_us"] > 2000 and cpu["over"] > 0, a
    assert off["min_us"] < cpu["min_us"] / 4, a


TWO_EXECUTORS_ONE_KERNEL = """executors:
  - {name: kernel, core: 0, priority: 60}
  - {name: plain, core: 0, priority: 50}
callbacks:
  # vecadd sized to 10 ms: a request of megabytes
  - {name: big, executor: kernel, trigger: {timer_ms: 100}, cpu_us: 200,
     segments: [{accelerator: acc0, service: vecadd, wcet_us: 10000}]}
  - {name: small, executor: plain, trigger: {timer_ms: 100}, cpu_us: 200}
chains:
  - {name: big, priority: 9, path: [big]}
  - {name: small, priority: 5, path: [small]}
"""


@pytest.mark.slow
def test_an_executor_holds_no_request_but_in_the_servers_buffer(tmp_path):
    summary, _ = run(workload(tmp_path, "one_kernel", TWO_EXECUTORS_ONE_KERNEL), "paam", tmp_path / "out",
                     duration=1)
    sampled = {p["process"]: p for p in summary["resources"]}
    # The server's region holds the request (and its response): shared
    # memory, mapped by the kernel's executor too.
    server = sampled["server"]
    region_kb = server["rss_kb"]["max"] - server["private_kb"]["max"]
    assert region_kb > 8 << 10, server
    # Neither executor keeps a copy of its own: the executor without the
    # kernel held the runner's copy of every request (as much as the region
    # less the response), the other its own besides.
    for name in ("executor kernel", "executor plain"):
        assert sampled[name]["private_kb"]["max"] < region_kb / 5, (sampled[name], region_kb)


TWO_THREADS = """executors:
  - {{name: ex, core: 0, priority: 50, threads: {threads}}}
callbacks:
  # released together: a waits 3 ms for the accelerator after its CPU work
  - {{name: a, executor: ex, trigger: {{timer_ms: 20}}, cpu_us: 2000,
     segments: [{{accelerator: acc0, service: busy, wcet_us: 3000}}]}}
  - {{name: b, executor: ex, trigger: {{timer_ms: 20}}, cpu_us: 2000}}
chains:
  - {{name: a, priority: 9, path: [a]}}
  - {{name: b, priority: 5, path: [b]}}
"""


@pytest.mark.slow
def test_an_executors_second_thread_runs_a_callback_while_the_first_waits(tmp_path):
    b_p50 = {}
    for threads in (1, 2):
        out = tmp_path / f"threads{threads}"
        _, chains = run(workload(tmp_path, f"threads{threads}", TWO_THREADS.format(threads=threads)), "paam", out)
        assert chains["a"]["count"] >= 90 and chains["b"]["count"] >= 90, chains
        b_p50[threads] = chains["b"]["p50_us"]
        trace = json.loads((out / "trace.json").read_text())["traceEvents"]
        tracks = {e["tid"] for e in trace if e.get("cat") == "callback"}
        assert len(tracks) == threads, tracks
    # One thread: b waits out a's CPU work and its kernel (about 6.5 ms);
    # two: b runs on the second thread while a waits (about 3 ms).
    assert b_p50[2] < b_p50[1] / 1.5, b_p50


# The two timers every millisecond, 20 us of work each.
FAST_TIMERS = TWO_TIMERS.replace("timer_ms: 20", "timer_ms: 1").replace("cpu_us: 2000", "cpu_us: 20")


@pytest.mark.slow
def test_a_run_that_fills_its_trace_says_how_far_it_was_checked(tmp_path):
    out = tmp_path / "out"
    # 2 000 callback events a second: a trace of 1 000 fills in half a second.
    proc = rtaccel("run", workload(tmp_path, "fast", FAST_TIMERS), "--policy", "picas", "--duration", "2",
                   "--out", str(out), "--trace-events", "1000", "--quiet", check=0)
    # Said before the run: 2 000 events a second keep a trace of 1 000 for
    # half a second, and 4 000 and a tenth more keep the whole run.
    assert "rtaccel run: warning: executor 'ex' makes about 2000 trace events a second and keeps 1000 " \
           "(--trace-events): its trace fills about 0.5 s into the run, and the monitor checks the run up to " \
           "there; --trace-events 5000 keeps the whole run" in proc.stderr, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    ex, = summary["executors"]
    assert ex["trace_events"] == 1000 and ex["trace_events_lost"] > 2000, ex
    filled = summary["assumptions"]["trace_filled"]
    assert filled["of"] == "executor 'ex'" and filled["events"] == 1000, filled
    assert 0.2 < filled["at_s"] < 1.0, filled
    assert sum(c["count"] for c in summary["assumptions"]["callbacks"]) == 1000, summary["assumptions"]
    assert f"# picas: the trace of executor 'ex' filled {filled['at_s']:.1f} s into the run (1000 events)" \
        in proc.stdout, proc.stdout
    # Without the option, the million a run keeps by default.
    quiet = rtaccel("run", workload(tmp_path, "fast", FAST_TIMERS), "--policy", "picas", "--duration", "1",
                    "--out", str(tmp_path / "default"), "--quiet", check=0)
    assert "trace events a second" not in quiet.stderr, quiet.stderr
    default = json.loads((tmp_path / "default" / "summary.json").read_text())
    assert default["assumptions"]["trace_filled"] is None
    assert default["executors"][0]["trace_events_lost"] == 0


@pytest.mark.slow
def test_the_latency_table_gives_each_instances_start_to_the_nanosecond(tmp_path):
    # A chain starts at its timer's releases, k periods of 1 234 567 ns
    # after the first: a start past a second has seven digits before the
    # point, which six significant ones would round away.
    path = workload(tmp_path, "starts", one_timer_chain(timer_ms=1.234567, cpu_us=50))
    out = tmp_path / "out"
    run(path, "picas", out)
    rows = [row.split(",") for row in (out / "latency.csv").read_text().splitlines()[1:]]
    late = [r for r in rows if float(r[1]) > 1e6]
    assert late, rows[-3:]
    for name, start, latency in rows:
        assert re.fullmatch(r"\d+\.\d{3}", start) and re.fullmatch(r"\d+\.\d{3}", latency), (start, latency)
        periods = round(float(start) * 1000 / 1234567)
        assert int(start.replace(".", "")) == periods * 1234567, start


@pytest.mark.slow
def test_timers_release_nothing_after_the_runs_end_however_late_the_runner_stops_them(tmp_path):
    # The runner looks every 20 ms and runs at normal priority: a loaded
    # machine can keep it from stopping the executors for long after the
    # run's end. Stopped for 2.5 s across the end here, it must not matter:
    # every release after the end would overflow records sized for the
    # duration (8 activations of slack), and a default run said its trace
    # had filled.
    out = tmp_path / "out"
    proc = subprocess.Popen([str(EXEC), workload(tmp_path, "fast", FAST_TIMERS), "--policy", "picas",
                             "--duration", "11", "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # Printed 10 s in; the run ends at 11 s.
        assert any("10/11 s" in line for line in proc.stderr), "the run did not get to 10 s"
        proc.send_signal(signal.SIGSTOP)
        time.sleep(2.5)
        proc.send_signal(signal.SIGCONT)
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["duration_s"] > 12, summary["duration_s"]  # the runner did stop them late
    # Each timer's 11 000 releases were run or skipped (late by more than a
    # period, as a ROS 2 timer skips them), and none came after the end.
    ex, = summary["executors"]
    assert sum(t["activations"] for t in summary["timers"]) + ex["timer_overruns"] == 2 * 11000, (summary["timers"], ex)
    assert ex["trace_events_lost"] == 0, ex
    assert summary["assumptions"]["trace_filled"] is None


# Six timers every millisecond, 20 us of work each: 6 000 trace events a second.
SIX_FAST_TIMERS = "executors:\n  - {name: ex, core: 0, priority: 50}\ncallbacks:\n" + "".join(
    f"  - {{name: t{i}, executor: ex, trigger: {{timer_ms: 1}}, cpu_us: 20}}\n" for i in range(6)) + \
    "chains:\n" + "".join(f"  - {{name: t{i}, priority: {i + 1}, path: [t{i}]}}\n" for i in range(6))


@pytest.mark.slow
def test_the_runner_writes_a_long_runs_trace_without_holding_it(tmp_path):
    path = workload(tmp_path, "six", SIX_FAST_TIMERS)
    ended = {}
    for duration in (1, 8):
        out = tmp_path / f"s{duration}"
        summary, _ = run(path, "picas", out, duration=duration)
        doc = json.loads((out / "trace.json").read_text())
        assert trace_format.check(doc) == []
        callbacks = sum(e.get("cat") == "callback" for e in doc["traceEvents"])
        assert callbacks == summary["executors"][0]["trace_events"] > 4000 * duration, callbacks
        runner = next(p for p in summary["resources"] if p["process"] == "runner")
        # What writing the results took beyond the run's own samples.
        ended[duration] = (runner["peak_kb"] - runner["rss_kb"]["max"], (out / "trace.json").stat().st_size >> 10)
    # Seven seconds more of trace (about 8 MB of it) took the runner less
    # than that more at the end: it writes the trace as it makes it. What
    # it keeps a trace event for the monitor and the flows, tens of bytes,
    # is within the few MB by which the end's needs vary (here the longer
    # run's end took 3 MB less). Made whole in memory as one JSON document,
    # the trace took about nine times its size (66 MB more).
    more_kb, more_trace_kb = ended[8][0] - ended[1][0], ended[8][1] - ended[1][1]
    assert more_kb < more_trace_kb, ended
    # A second of it, as a user cuts a trace too large for a browser: the
    # callbacks that overlap it, on a timeline of its own.
    proc = rtaccel("cut", str(out), "--from", "2", "--to", "3", check=0)
    assert f"{out}/trace-2-3s.json (open in ui.perfetto.dev)" in proc.stdout, proc.stdout
    part = json.loads((out / "trace-2-3s.json").read_text())
    assert trace_format.check(part) == []
    overlapping = sum(e.get("cat") == "callback" and e["ts"] <= 3e6 and e["ts"] + e["dur"] >= 2e6
                      for e in doc["traceEvents"])
    assert sum(e.get("cat") == "callback" for e in part["traceEvents"]) == overlapping > 4000, overlapping


def test_a_run_on_an_uncalibrated_machine_says_so(tmp_path):
    proc = rtaccel("run", workload(tmp_path, "two", TWO_TIMERS), "--duration", "0.5", "--out",
                   str(tmp_path / "out"), check=RAN)
    assert ("rtaccel run: this machine has no calibration at /nonexistent/calibration.json: the bounds "
            "take the workload's overheads" in proc.stderr), proc.stderr


@pytest.mark.slow
def test_paam_never_queues_a_critical_request_behind_a_best_effort_one(tmp_path):
    path = workload(tmp_path, "accel", ACCEL)
    _, chains = run(path, "paam", tmp_path / "paam", duration=3)
    _, direct = run(path, "picas", tmp_path / "picas", duration=3)
    trace, h_paam = segment_events(tmp_path / "paam", "h: busy")
    _, h_direct = segment_events(tmp_path / "picas", "h: busy")
    assert len(h_paam) >= 80 and len(h_direct) >= 80
    # Direct invocation: h's kernel waits for whichever 10 ms kernel of l holds
    # the device, which it does three times out of four. paam: l's bucket is
    # preempted. The 90th percentiles, not the maxima: one host stall must not
    # decide.
    p90_paam = percentile([e["dur"] for e in h_paam], 0.9)
    p90_direct = percentile([e["dur"] for e in h_direct], 0.9)
    assert p90_paam < 0.5 * p90_direct, (p90_paam, p90_direct)
    # In the server's queue, a kernel of l starts while a request of h waits
    # only if the server has not seen h's request yet: its worker is woken by
    # the submit, so a host stall there can let one l in. A queue that ignored
    # priority would start l in most of h's waits, as direct invocation does
    # (the 90th percentiles above), so a few per cent is the line.
    waits = {}
    for e in trace:
        if e.get("cat") == "queue" and e["name"] == "queued h: busy":
            waits.setdefault(e["id"], {})[e["ph"]] = e["ts"]
    l_starts = [e["ts"] for e in trace if e.get("cat") == "kernel" and e["name"] == "l: busy"]
    assert l_starts and waits
    overtaken = [w for w in waits.values() if any(w["b"] < start < w["e"] for start in l_starts)]
    assert len(overtaken) <= max(1, 0.03 * len(h_paam)), (len(overtaken), len(h_paam), overtaken[:3])
    # The bound itself is checked on the long runs of docs/benchmarks.md: a
    # short run on a shared CI machine can meet a host stall that no analysis of
    # this workload covers. h's median is 2.5-2.6 ms against a 3.75 ms bound
    # on a quiet host; a slow one took it to 4.6 and 5.3 ms (76 of 100
    # instances over the bound, with 390 ms of core 1 stolen by the host in
    # the 3 s and h's 0.5 ms of CPU work taking up to 1.4 ms), the same
    # before and after the change it ran beside. What must hold on any host
    # is that the run's monitor names what broke in every instance over it.
    h = chains["h"]
    latencies = [float(row.split(",")[2]) for row in
                 (tmp_path / "paam" / "latency.csv").read_text().splitlines()[1:]
                 if row.split(",")[0] == "h"]
    assert len(latencies) == h["count"]
    assert h["over_bound"] == 0 or h["unexplained"] == 0, h


def test_runs_that_share_a_label_are_numbered_and_the_others_keep_theirs():
    isolated = {"policy": "paam", "isolation": {"regulator": {}}}
    runs = [{"policy": "paam"}, {"policy": "ros2"}, {"policy": "paam"}, isolated, isolated, {"policy": "picas"}]
    assert run_labels(runs) == ["paam#1", "ros2", "paam#2", "paam+iso#1", "paam+iso#2", "picas"]


@pytest.mark.slow
def test_instances_over_the_bound_are_counted_and_compare_names_them(tmp_path):
    path = workload(tmp_path, "accel", ACCEL)
    out = tmp_path / "paam"
    summary, chains = run(path, "paam", out)
    # The run sampled its processes each second: none opened a descriptor
    # it kept, and the trace has their counters.
    sampled = {p["process"]: p for p in summary["resources"]}
    assert set(sampled) == {"runner", "server", "executor hi", "executor lo"}, sampled
    for p in sampled.values():
        assert p["samples"] >= 2 and p["rss_kb"]["first"] > 0, p
        assert p["descriptors"]["first"] == p["descriptors"]["last"] > 0, p
    counters = {e["name"] for e in json.loads((out / "trace.json").read_text())["traceEvents"]
                if e.get("ph") == "C" and "descriptors" in e.get("args", {})}
    assert counters == {f"{name} (pid {p['pid']})" for name, p in sampled.items()}, counters
    rows = [row.split(",") for row in (out / "latency.csv").read_text().splitlines()[1:]]
    for name, c in chains.items():
        if c["wcrt_us"] is None:
            assert c["over_bound"] is None
            continue
        over = sum(1 for r in rows if r[0] == name and float(r[2]) > c["wcrt_us"])
        assert c["over_bound"] == over and c["bound_held"] == (over == 0), c
    # The same run judged against a bound at its median: compare counts the
    # instances over it, tells what that means, and exits 1.
    h = chains["h"]
    analysed = h["wcrt_us"]
    tight = tmp_path / "tight"
    tight.mkdir()
    (tight / "latency.csv").write_text((out / "latency.csv").read_text())
    h["wcrt_us"] = h["p50_us"]
    h["over_bound"] = sum(1 for r in rows if r[0] == "h" and float(r[2]) > h["p50_us"])
    h["bound_held"] = False
    summary["critical_bounds_held"] = False
    assert 0 < h["over_bound"] < h["count"]
    # First as if the monitor had found nothing to explain them: the run
    # calls that a bug of the analysis.
    h["explained_by"], h["unexplained"] = [], h["over_bound"]
    (tight / "summary.json").write_text(json.dumps(summary))
    # Beside the run itself: the table's one bound column is the first
    # run's, and the note gives each run's. Two runs of one policy are
    # numbered, so that each line names one of them.
    r = rtaccel("compare", str(out), str(tight))
    assert r.stdout.startswith(f"# paam#1: {out} (accel, "), r.stdout
    assert f"paam#2: {tight} (accel, " in r.stdout.splitlines()[0], r.stdout
    assert "| paam#1 p50 " in r.stdout and "| paam#2 p50 " in r.stdout, r.stdout
    assert f"# h: the runs' bounds differ: {analysed / 1000:.2f} (paam#1), {h['p50_us'] / 1000:.2f} (paam#2)" \
        in r.stdout, r.stdout
    share = f"{100 * h['over_bound'] / h['count']:.0f}"
    over = (f"h: {h['over_bound']} of {h['count']} instances ({share}%) over its {h['p50_us'] / 1000:.1f} ms "
            f"bound, by up to {(h['max_us'] - h['p50_us']) / 1000:.1f} ms")
    assert f"# paam#2: {over}" in r.stdout, r.stdout
    # The tight copy alone: what the real run's own monitor found on this
    # machine is not this test's.
    r = rtaccel("compare", str(tight))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"# paam: {over}; {h['over_bound']} with nothing broken in their time that explains them (below)" \
        in r.stdout, r.stdout
    assert "beyond what the assumptions broken in its time explain" in r.stdout, r.stdout
    assert "bug in rtaccel's analysis" in r.stdout, r.stdout
    # Then with every instance explained: the broken assumption is listed
    # under the chain, and no bug is claimed.
    why = "callback h1 ran up to 9.0 ms of CPU against a WCET of 1.0 ms in 3 instances of 3"
    h["explained_by"], h["unexplained"] = [why], 0
    (tight / "summary.json").write_text(json.dumps(summary))
    r = rtaccel("compare", str(tight))
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"#     {why}" in r.stdout, r.stdout
    assert f"# paam: {over}; each had an assumption of the analysis broken in its time (below)\n" \
        in r.stdout, r.stdout
    assert "EXCEEDED" not in r.stdout, r.stdout
    assert "bug in rtaccel's analysis" not in r.stdout, r.stdout
    # In a run long enough to fill an executor's trace, what came after it
    # was not checked: said once for the run, and in the verdict.
    summary["assumptions"]["trace_filled"] = {"of": "executor 'hi'", "events": 1000000, "at_s": 7980.25}
    h["unchecked"] = 2
    (tight / "summary.json").write_text(json.dumps(summary))
    r = rtaccel("compare", str(tight))
    assert "# paam: the trace of executor 'hi' filled 7980.2 s into the run (1000000 events): the run " \
           "checked callbacks, kernels and hops, and instances over their bound, up to then only" in r.stdout, r.stdout
    assert f"# paam: {over}; each had an assumption of the analysis broken in its time (below); 2 came " \
           "after the trace filled, unchecked" in r.stdout, r.stdout
    summary["assumptions"]["trace_filled"], h["unchecked"] = None, 0
    # A long explanation: its first lines (the monitor ranks them), where
    # the rest are, and the verdict on the unexplained instances, always.
    many = [f"callback h{k} ran up to {12 - k}.0 ms of CPU against a WCET of 1.0 ms in 1 instance of 3"
            for k in range(12)]
    verdict = "1 instance beyond even that bound: the analysis does not hold for this run"
    h["explained_by"], h["unexplained"] = many + [verdict], 1
    (tight / "summary.json").write_text(json.dumps(summary))
    shown = [line[6:] for line in rtaccel("compare", str(tight)).stdout.splitlines() if line.startswith("#     ")]
    assert shown == many[:8] + [f"and 4 more that can have added less ({tight}/summary.json, the chain's "
                                "explained_by)", verdict], shown
    # Up to one line more than that is shown whole.
    h["explained_by"], h["unexplained"] = many[:9], 0
    (tight / "summary.json").write_text(json.dumps(summary))
    shown = [line[6:] for line in rtaccel("compare", str(tight)).stdout.splitlines() if line.startswith("#     ")]
    assert shown == many[:9], shown
    # One run's output says what its processes held; a process whose
    # descriptors grew is named, in a comparison too.
    fds = sum(p["descriptors"]["first"] for p in summary["resources"])
    assert f"# paam: its 4 processes held {fds} open descriptors at the start and {fds} at the end, " \
        in rtaccel("compare", str(tight)).stdout
    assert "open descriptors" not in rtaccel("compare", str(out), str(tight)).stdout
    runner = next(p for p in summary["resources"] if p["process"] == "runner")
    assert runner["peak_kb"] >= runner["rss_kb"]["max"], runner
    assert f"; the runner peaked at {runner['peak_kb'] / 1024:.0f} MB resident writing the results" \
        in rtaccel("compare", str(tight)).stdout
    summary["resources"][2]["descriptors"]["last"] += 3
    (tight / "summary.json").write_text(json.dumps(summary))
    first = summary["resources"][2]["descriptors"]["first"]
    grew = f"descriptors GREW in {summary['resources'][2]['process']} ({first} -> {first + 3})"
    assert grew in rtaccel("compare", str(out), str(tight)).stdout
    # So is a real-time process whose memory grew by more than a MiB (not
    # the runner, whose samples of the run grow with it).
    for p in summary["resources"][:3]:
        p["rss_kb"]["last"] = p["rss_kb"]["first"] + 2048
    (tight / "summary.json").write_text(json.dumps(summary))
    shown = rtaccel("compare", str(out), str(tight)).stdout
    grown = [p for p in summary["resources"][1:3]]
    assert "resident memory GREW in " + ", ".join(
        f"{p['process']} ({p['rss_kb']['first'] / 1024:.1f} -> {p['rss_kb']['last'] / 1024:.1f} MB)"
        for p in grown) in shown, shown
    assert "runner (" not in shown, shown
    # Without real-time priority nothing is locked, and memory is not judged.
    summary["realtime"] = False
    (tight / "summary.json").write_text(json.dumps(summary))
    assert "resident memory GREW" not in rtaccel("compare", str(out), str(tight)).stdout
    summary["realtime"] = True
    # A best-effort chain's name longer than the column is shown whole,
    # and its row's columns stay under their heads.
    h["chain"], h["critical"] = "h_with_a_name_longer_than_the_column", False
    (tight / "summary.json").write_text(json.dumps(summary))
    lines = rtaccel("compare", str(tight)).stdout.splitlines()
    head = next(line for line in lines if line.startswith("chain "))
    row = next(line for line in lines if line.startswith("h_with_a_name_longer_than_the_column (be) "))
    assert row.index("|") == head.index("|"), lines


def start_runner(tmp_path, path):
    proc = subprocess.Popen([str(EXEC), path, "--policy", "paam", "--duration", "60",
                             "--out", str(tmp_path / "out"), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while len(children_of(proc.pid)) < 3:  # the server and both executors
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the executors did not start"
        time.sleep(0.05)
    time.sleep(1.0)
    return proc, children_of(proc.pid)


def start_rtaccel_run(tmp_path, out, new_session=False, new_group=False, preexec_fn=None):
    """`rtaccel run` of ACCEL for 60 s into OUT, a second after its runner
    started the server and both executors: (the command, its runner's pid).
    NEW_SESSION: in a session and process group of its own, as a shell's
    job is. NEW_GROUP: in a process group of its own in this session, as a
    job of a shell with job control is: the kernel stops only such a group
    on SIGTSTP, one whose parent (the shell) stays to resume it."""
    proc = subprocess.Popen([sys.executable, "-m", "rtaccel.cli", "run", workload(tmp_path, "accel", ACCEL),
                             "--duration", "60", "--out", str(out), "--quiet"], cwd=ROOT, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=new_session, process_group=0 if new_group else None,
                            preexec_fn=preexec_fn)
    deadline = time.monotonic() + 20
    while not (runner := children_of(proc.pid)) or len(children_of(runner[0])) < 3:
        if proc.poll() is not None or time.monotonic() >= deadline:
            proc.kill()
            pytest.fail(f"the run did not start: {proc.communicate()[1]}")
        time.sleep(0.05)
    time.sleep(1.0)
    return proc, runner[0]


@pytest.mark.slow
def test_the_progress_line_counts_critical_misses_apart(tmp_path):
    # `late` misses its 1 ms deadline in every instance by design, and is not
    # critical; `hot` has 200 ms for 1 ms of work. A log gets the last state
    # at the end, whatever the run's length.
    path = workload(tmp_path, "progress", """executors:
  - {name: ex, core: 0, priority: 50}
callbacks:
  - {name: hot, executor: ex, trigger: {timer_ms: 200}, cpu_us: 1000}
  - {name: late, executor: ex, trigger: {timer_ms: 20}, cpu_us: 3000}
chains:
  - {name: hot, priority: 9, path: [hot]}
  - {name: late, priority: 1, path: [late], deadline_ms: 1, critical: false}
""")
    out = tmp_path / "out"
    proc = rtaccel("run", path, "--duration", "2", "--out", str(out), check=0)
    last = [line for line in proc.stderr.splitlines() if line.startswith("rtaccel run: ")][-1]
    m = re.fullmatch(r"rtaccel run: \w+ +2/2 s, (\d+) chain instances, 0 critical deadline misses, "
                     r"(\d+) non-critical, 0 over their bounds", last)
    assert m, proc.stderr
    chains = {c["chain"]: c for c in json.loads((out / "summary.json").read_text())["chains"]}
    instances, late = int(m[1]), int(m[2])
    assert 0 < late <= chains["late"]["count"] and instances <= chains["hot"]["count"] + chains["late"]["count"]
    assert instances - late > 0


def run_on_a_terminal(args, columns=80, seconds=60):
    """`rtaccel ARGS` as a shell runs it in the foreground of a terminal
    COLUMNS wide (a pseudo-terminal: its stdin, stdout and stderr, and its
    controlling terminal): (its exit status, what the terminal got). Ended
    with all it started where it runs past SECONDS."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "rtaccel.cli", *args], cwd=ROOT, env=ENV,
                            stdin=follower, stdout=follower, stderr=follower, start_new_session=True,
                            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    os.close(follower)
    got = b""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if not select.select([leader], [], [], deadline - time.monotonic())[0]:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            got += chunk
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(leader)
        with contextlib.suppress(ProcessLookupError):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return proc.returncode, got.decode(errors="replace")


@pytest.mark.slow
def test_a_best_effort_program_that_reads_the_terminal_is_not_stopped_by_it(tmp_path):
    # A run in a terminal's foreground: its best-effort programs, each in a
    # process group of its own, were in the background there. Before, they
    # read the terminal, and one that did (ffmpeg looks for its `q` key)
    # was stopped by SIGTTIN, its load silently absent from the run; and so
    # was one that opened /dev/tty (a password prompt).
    out = tmp_path / "out"
    reads_input = 'read line; echo "read: $?"; exec sleep 60'
    opens_tty = 'read line < /dev/tty; echo "tty: $?"; exec sleep 60'
    status, screen = run_on_a_terminal(["run", workload(tmp_path, "timers", TWO_TIMERS), "--duration", "2",
                                        "--out", str(out), "--quiet", "--best-effort", reads_input,
                                        "--best-effort", opens_tty])
    assert status in RAN, screen
    assert (out / "best_effort_0.log").read_text() == "read: 1\n"  # end of input: /dev/null
    # No controlling terminal, as in a cron job: /dev/tty is not there.
    assert (out / "best_effort_1.log").read_text().endswith("No such device or address\ntty: 2\n")


@pytest.mark.slow
@pytest.mark.parametrize("columns", [60, 200])
def test_the_progress_line_fits_the_terminal_it_is_rewritten_on(tmp_path, columns):
    # Rewritten every second after a carriage return: a line wider than
    # the terminal wraps, and each rewrite left a line behind. Before, on a
    # terminal of 80 columns, the line was 112 characters wide.
    status, screen = run_on_a_terminal(["run", workload(tmp_path, "timers", TWO_TIMERS), "--duration", "3",
                                        "--out", str(tmp_path / "out")], columns)
    assert status in RAN, screen
    progress = re.findall(r"\r([^\r\n]*)\x1b\[K", screen)
    assert len(progress) >= 3, screen
    assert all(len(line) < columns for line in progress), progress
    if columns == 200:
        assert re.fullmatch(r"rtaccel run: paam +3/3 s, \d+ chain instances, \d+ critical deadline misses, "
                            r"\d+ over (its bound|their bounds)", progress[-1]), progress
    else:
        assert re.fullmatch(r"paam 3/3 s: \d+ instances, \d+ critical misses, \d+ over bound", progress[-1]), progress


@pytest.mark.slow
@needs.mark("root", os.geteuid() != 0, "the interference is a SCHED_FIFO thread on the executor's core")
def test_the_progress_line_counts_instances_over_their_bounds_as_they_come(tmp_path):
    # A loop at SCHED_FIFO 99 on the executor's core, busy 100 ms of every
    # 300 ms for as long as the run lasts, holds `t` (bounded in
    # milliseconds) off its core: the instances released in its busy spans
    # end over the bound, however long the run took to start.
    path = workload(tmp_path, "over", one_timer_chain(timer_ms=50, cpu_us=1000))
    out = tmp_path / "out"
    spin = ("import time\n"
            "while True:\n"
            "    t = time.monotonic() + 0.1\n"
            "    while time.monotonic() < t: pass\n"
            "    time.sleep(0.2)\n")
    hog = f"exec timeout 60 chrt -f 99 taskset -c 0 {sys.executable} -c '{spin}'"
    # Over its bound with real-time priority: the run exits 1, as compare would.
    proc = rtaccel("run", path, "--duration", "2", "--out", str(out), "--best-effort", hog, check=1)
    lines = [line for line in proc.stderr.splitlines() if re.match(r"rtaccel run: \w+ +\d+/2 s, ", line)]
    counts = [re.fullmatch(r"rtaccel run: \w+ +\d+/2 s, \d+ chain instances, \d+ critical deadline misses, "
                           r"(\d+) over (?:its bound|their bounds)", line) for line in lines]
    assert counts and all(counts), proc.stderr
    over = int(counts[-1][1])
    chain = json.loads((out / "summary.json").read_text())["chains"][0]
    # The summary counts what ended before the executors were told to stop,
    # which the last progress line came just before.
    assert 1 <= over <= chain["over_bound"], (proc.stderr, chain)
    # Under another policy the bounds are the paam system's, and said so.
    proc = rtaccel("run", path, "--policy", "picas", "--duration", "2", "--out", str(out), "--best-effort", hog,
                   check=0)
    last = [line for line in proc.stderr.splitlines() if re.match(r"rtaccel run: picas +2/2 s, ", line)][-1]
    assert re.search(r", [1-9]\d* over the paam bounds$", last), proc.stderr


def test_killing_the_runner_leaves_no_orphans_and_no_earlier_runs_results(tmp_path):
    # The folder held an earlier run's results: a run killed before it wrote
    # its own must not leave them to be read as its.
    (tmp_path / "out").mkdir()
    for name in ("summary.json", "trace.json", "latency.csv", "regulator.trace.json"):
        (tmp_path / "out" / name).write_text("{}")
    proc, children = start_runner(tmp_path, workload(tmp_path, "accel", ACCEL))
    proc.kill()
    proc.wait()
    assert wait_gone(children) == []
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["server.log"]


@pytest.mark.parametrize("sig, why", [(signal.SIGKILL, "the OOM killer? `dmesg` says"),
                                      (signal.SIGSEGV, "a fault in rtaccel: what it said last is above")],
                         ids=["killed", "crashed"])
def test_rtaccel_run_says_how_its_runner_ended_where_it_wrote_no_results(tmp_path, sig, why):
    # Before, every signal was put down to the OOM killer, a crash too.
    def no_core_file():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    out = tmp_path / "out"
    proc, runner = start_rtaccel_run(tmp_path, out, preexec_fn=no_core_file)
    os.kill(runner, sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 3, stderr
    assert (f"rtaccel-exec was killed by {sig.name} and wrote no results to {out} ({why}); the next run removes "
            "what it left behind") in stderr


@pytest.mark.slow
def test_a_second_run_into_the_folder_of_a_running_one_is_refused(tmp_path):
    proc, children = start_runner(tmp_path, workload(tmp_path, "accel", ACCEL))
    try:
        second = rtaccel("run", workload(tmp_path, "accel", ACCEL), "--duration", "1", "--out",
                         str(tmp_path / "out"), "--quiet", check=2)
        assert f"another rtaccel run writes into {tmp_path}/out (give another --out)" in second.stderr
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
    assert wait_gone(children) == []
    # Its runner gone, the folder takes a run again.
    rtaccel("run", workload(tmp_path, "accel", ACCEL), "--duration", "1", "--out", str(tmp_path / "out"),
            "--quiet", check=RAN)


@pytest.mark.slow
def test_a_run_beside_another_says_so_and_so_does_its_summary(tmp_path):
    # Two runs share the cores: neither measures what it alone would take.
    # The first sees the second as it samples its processes (every second);
    # the second sees the first as it starts.
    first_out, second_out = tmp_path / "first", tmp_path / "second"
    proc, runner = start_rtaccel_run(tmp_path, first_out)
    try:
        second = rtaccel("run", workload(tmp_path, "timers", TWO_TIMERS), "--duration", "2", "--out",
                         str(second_out), check=RAN)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    warned = [line for line in second.stderr.splitlines() if "another run" in line]
    assert warned == [f"rtaccel run: warning: another run is under way on this machine (its runner: pid {runner}); "
                      "the two share the cores, and neither run's times are what it alone would take"], second.stderr
    others = json.loads((second_out / "summary.json").read_text())["other_runs"]
    assert [o["runner_pid"] for o in others] == [runner] and others[0]["first_seen_s"] == 0, others
    assert f"another run was under way beside it (its runner: pid {runner}, seen 0 to " in second.stdout

    others = json.loads((first_out / "summary.json").read_text())["other_runs"]
    assert len(others) == 1 and 0 < others[0]["first_seen_s"] <= others[0]["last_seen_s"], others
    assert re.search(r"rtaccel run: warning: another run began \d+ s into this one on this machine \(its runner: "
                     rf"pid {others[0]['runner_pid']}\)", stderr), stderr
    # Alone, nothing of the kind.
    alone = rtaccel("run", workload(tmp_path, "timers", TWO_TIMERS), "--duration", "1", "--out",
                    str(tmp_path / "alone"), "--quiet", check=RAN)
    assert "another run" not in alone.stderr, alone.stderr
    assert "other_runs" not in json.loads((tmp_path / "alone" / "summary.json").read_text())


def test_interrupt_stops_cleanly_and_writes_the_results(tmp_path):
    proc, children = start_runner(tmp_path, workload(tmp_path, "accel", ACCEL))
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 130
    assert wait_gone(children) == []
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["interrupted"] and 0.5 < summary["duration_s"] < 30
    assert {c["chain"]: c for c in summary["chains"]}["h"]["count"] > 10


def test_rtaccel_run_sent_sigterm_returns_once_the_results_are_written(tmp_path):
    # kill, timeout and service managers stop a program with SIGTERM, to it
    # alone: the command must not return while its runner still writes.
    out = tmp_path / "out"
    proc, runner = start_rtaccel_run(tmp_path, out)
    try:
        processes = [runner] + children_of(runner)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert (out / "summary.json").exists() and (out / "trace.json").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"]
    # The table says so too: its figures are of a shorter run than asked.
    assert f"# paam: the run was interrupted {summary['duration_s']:.1f} s into it; its figures are of the " \
        "time before" in stdout, stdout
    assert "# results: " in stdout, stdout
    assert wait_gone(processes) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["ctrl-c", "hang-up"])
def test_a_terminals_ctrl_c_or_hang_up_ends_the_run_in_order_and_its_results_are_written(tmp_path, sig):
    # A terminal sends these to its foreground process group, a shell whose
    # terminal hung up to each of its jobs' groups: the command, its runner,
    # the server and the executors at once. The runner alone acts on them:
    # the executors leave the server before it stops. Before, a hang-up
    # killed them all and the run left no results, and a Ctrl-C stopped the
    # server under its executors.
    out = tmp_path / "out"
    proc, runner = start_rtaccel_run(tmp_path, out, new_session=True)
    try:
        processes = [runner] + children_of(runner)
        os.killpg(proc.pid, sig)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and summary["failed"] is None, summary
    assert {c["chain"]: c for c in summary["chains"]}["h"]["count"] > 10
    assert f"# paam: the run was interrupted {summary['duration_s']:.1f} s into it" in stdout, stdout
    assert "# results: " in stdout, stdout
    assert wait_gone(processes) == []
    assert "left at shutdown" not in (out / "server.log").read_text()


@pytest.mark.parametrize("to", ["group", "each"])
def test_sigterm_to_every_process_of_the_run_stops_it_in_order(tmp_path, to):
    # `timeout` signals its whole process group, a service manager every
    # process of its cgroup: the command, its runner, the server and the
    # executors at once. Before, the executors died in the callback in hand,
    # and the server released their registrations as closed connections.
    # Now each passes it to the runner, which stops them in its order.
    out = tmp_path / "out"
    proc, runner = start_rtaccel_run(tmp_path, out, new_session=True)
    try:
        processes = [runner] + children_of(runner)
        if to == "group":
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            for pid in [proc.pid] + processes:
                os.kill(pid, signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 130, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and summary["failed"] is None, summary
    assert "releasing" not in (out / "server.log").read_text()
    assert wait_gone(processes) == []


@pytest.mark.slow
def test_a_run_under_nohup_outlives_the_hang_up(tmp_path):
    # `nohup rtaccel run ... &`: started with SIGHUP ignored, the run is to
    # go on when the terminal goes. Before, the command passed the hang-up
    # on and the runner stopped on it.
    out = tmp_path / "out"
    proc, runner = start_rtaccel_run(tmp_path, out, new_session=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        processes = [runner] + children_of(runner)
        os.killpg(proc.pid, signal.SIGHUP)
        time.sleep(1.0)
        going_on = proc.poll() is None and all(alive(p) for p in processes)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert going_on, stderr
    assert proc.returncode == 130, stderr
    assert json.loads((out / "summary.json").read_text())["interrupted"]
    assert wait_gone(processes) == []


@pytest.mark.slow
def test_a_terminals_ctrl_z_does_not_stop_the_run(tmp_path):
    # Ctrl-Z sends SIGTSTP to the foreground process group. Before, it
    # stopped the command, its runner, the server and the executors, and
    # every instance across the pause went over its bound, blamed on the
    # server's overhead and the timers' release.
    out = tmp_path / "out"
    proc, runner = start_rtaccel_run(tmp_path, out, new_group=True)
    try:
        processes = [proc.pid, runner] + children_of(runner)
        os.killpg(proc.pid, signal.SIGTSTP)
        time.sleep(1.0)  # a stop takes effect as each process next runs: microseconds
        states = {command_of(p): state_of(p) for p in processes}
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever of it is left, stopped or not
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert "T" not in states.values(), states
    assert stderr.count("rtaccel run: Ctrl-Z does not pause a run") == 1, stderr
    assert proc.returncode == 130, stderr
    assert json.loads((out / "summary.json").read_text())["interrupted"]
    assert wait_gone(processes) == []


def test_a_hang_up_of_a_run_whose_output_reader_is_gone_leaves_its_results(tmp_path):
    # `rtaccel run ... 2>&1 | tee log` over ssh: tee goes with the session,
    # and the runner's next line (the progress line's last, as it stops)
    # meets a pipe without a reader. Here the reader reads the first byte
    # and leaves, before the hang-up.
    out = tmp_path / "out"
    proc = subprocess.Popen(["/bin/sh", "-c", '"$@" 2>&1 | head -c 1 >/dev/null', "sh", sys.executable, "-m",
                             "rtaccel.cli", "run", workload(tmp_path, "accel", ACCEL), "--duration", "60",
                             "--out", str(out)], cwd=ROOT, env=ENV, start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not (command := [p for p in children_of(proc.pid) if "rtaccel.cli" in command_of(p)]) or \
                not (runner := children_of(command[0])) or len(children_of(runner[0])) < 3 or \
                any(command_of(p).startswith("head") for p in children_of(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not start"
            time.sleep(0.05)
        processes = command + runner + children_of(runner[0])
        os.killpg(proc.pid, signal.SIGHUP)
        assert wait_gone(processes, 30) == []
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] and summary["failed"] is None, summary


def hang_up_under_a_run(tmp_path, *options):
    """`rtaccel run ... OPTIONS` on a terminal of its own that goes away once
    the runner has its three children: the command, as the session's
    leader, gets SIGHUP, and every write to the terminal after it fails
    (EIO). The shell opens the terminal as a new session's leader, which
    makes it the session's controlling terminal, and becomes `rtaccel run`.
    Returns the run's summary, once every process of the run is gone."""
    out = tmp_path / "out"
    terminal, peer = os.openpty()
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", 'exec "$@" <>"$TERMINAL" >&0 2>&0', "sh", sys.executable, "-m",
                                 "rtaccel.cli", "run", workload(tmp_path, "accel", ACCEL), "--duration", "60",
                                 "--out", str(out), "--quiet", *options],
                                cwd=ROOT, env=dict(ENV, TERMINAL=os.ttyname(peer)), start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        os.close(peer)
    try:
        deadline = time.monotonic() + 20
        while not (runner := children_of(proc.pid)) or len(children_of(runner[0])) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, "the run did not start"
            time.sleep(0.05)
        processes = runner + children_of(runner[0])
        os.close(terminal)  # the hang-up
        terminal = None
        assert proc.wait(timeout=30) == 130
    finally:
        if terminal is not None:
            os.close(terminal)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert wait_gone(processes) == []
    return json.loads((out / "summary.json").read_text())


def test_a_terminal_that_hangs_up_under_a_run_leaves_its_results(tmp_path):
    # Whenever it comes: while the executors get ready, or once they run.
    summary = hang_up_under_a_run(tmp_path)
    assert summary["interrupted"] and summary["failed"] is None


def test_a_hang_up_before_the_run_starts_is_an_interruption_with_results(tmp_path):
    # Made to happen: a server that takes the connection and never answers
    # holds the run before its start (the executors wait for the workload's
    # declaration), and the terminal goes away then. The run has had no
    # time: interrupted, not a failure to run (exit 3, and no results).
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    path = tmp_path / "silent.sock"
    server.bind(str(path))
    server.listen(8)
    try:
        summary = hang_up_under_a_run(tmp_path, "--socket", str(path))
    finally:
        server.close()
    assert summary["interrupted"] and summary["failed"] is None
    assert summary["duration_s"] == 0
    assert all(chain["count"] == 0 for chain in summary["chains"])


@pytest.mark.slow
@needs.mark("root", os.geteuid() != 0, "a small file system for the results is a tmpfs mount")
def test_a_full_disk_costs_the_trace_not_the_summary_and_says_so(tmp_path):
    # 32 KiB: the latency table and the summary fit, the trace does not.
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs", str(disk)], check=True)
    try:
        out = disk / "out"
        proc = rtaccel("run", workload(tmp_path, "timers", TWO_TIMERS), "--duration", "3", "--out", str(out),
                       "--quiet", check=3)
        assert f"cannot write {out}/trace.json (what was written is removed): No space left on device" \
            in proc.stderr, proc.stderr
        assert not (out / "trace.json").exists()
        summary = json.loads((out / "summary.json").read_text())
        assert {c["chain"] for c in summary["chains"]} == {"low", "high"}
        assert (out / "latency.csv").read_text().startswith("chain,start_us,latency_us\n")
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.slow
def test_a_chatty_best_effort_program_keeps_its_first_16_mib_and_its_last_words(tmp_path):
    # 20 MB of output: a program that prints each step writes that in
    # seconds, gigabytes in a long run, into the results folder.
    out = tmp_path / "out"
    chatty = "head -c 20000000 /dev/zero | tr '\\0' x; echo; echo last words"
    proc = rtaccel("run", workload(tmp_path, "timers", TWO_TIMERS), "--duration", "3", "--out", str(out),
                   "--quiet", "--best-effort", chatty, check=RAN)
    log = (out / "best_effort_0.log").read_bytes()
    assert log.startswith(b"x" * (16 << 20)) and log.endswith(b"x\nlast words\n")
    left_out = 20000000 + len("\nlast words\n") - (16 << 20) - 65536
    assert f"[rtaccel-isolate: {left_out} bytes of output left out here; the log keeps the first 16777216 " \
        "and the last 65536]\n".encode() in log
    assert len(log) < (16 << 20) + 65536 + 200
    assert 'exited with status 0 (its log: "last words")' in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_best_effort_command_that_puts_its_work_in_the_background_hears_that_the_work_was_ended(tmp_path):
    out = tmp_path / "out"
    proc = rtaccel("run", workload(tmp_path, "timers", TWO_TIMERS), "--duration", "2", "--out", str(out),
                   "--quiet", "--best-effort", "sleep 600 &", check=RAN)
    assert ("best-effort program 'sleep 600 &' exited with status 0 (its log: \"rtaccel-isolate: sh ended, and "
            "the 1 process(es) it left running were ended with it (keep best-effort work in the foreground of its "
            "command)\")") in proc.stderr, proc.stderr
    assert json.loads((out / "summary.json").read_text())["best_effort"][0]["ended"] == "exited with status 0"


TAKEN_BY_THE_RUN = {signal.SIGINT, signal.SIGHUP, signal.SIGTSTP, signal.SIGTTOU, signal.SIGTERM, signal.SIGPIPE}


@pytest.mark.parametrize("ignored", [set(), {signal.SIGHUP, signal.SIGINT}], ids=["terminal", "nohup-background"])
def test_a_best_effort_program_starts_with_the_signals_of_the_users_command(tmp_path, ignored):
    # The run takes Ctrl-C, Ctrl-Z, a hang-up, SIGTTOU and SIGPIPE for its
    # own processes. Before, a best-effort program started with them all
    # ignored but SIGHUP: a pipeline's writer got EPIPE instead of ending
    # ("yes: standard output: Broken pipe"), and `timeout -s INT` did not
    # end what it ran. Started from `nohup` in a script's background (SIGHUP
    # and SIGINT ignored), it keeps those two ignored, as its command would.
    out = tmp_path / "out"
    program = "grep SigIgn /proc/self/status; yes | head -c 1 >/dev/null; exec sleep 60"

    def start_ignoring():
        for sig in ignored:
            signal.signal(sig, signal.SIG_IGN)
    rtaccel("run", workload(tmp_path, "timers", TWO_TIMERS), "--duration", "1", "--out", str(out), "--quiet",
            "--best-effort", program, check=RAN, preexec_fn=start_ignoring)
    log = (out / "best_effort_0.log").read_text()
    assert ignored_signals(log) & TAKEN_BY_THE_RUN == ignored, log
    assert "Broken pipe" not in log, log


def test_working_sets_larger_than_half_the_memory_available_are_refused_before_any_is_mapped(tmp_path):
    available = next(int(line.split()[1]) << 10 for line in pathlib.Path("/proc/meminfo").read_text().splitlines()
                     if line.startswith("MemAvailable:"))
    count = available // 2 // (1 << 30) + 1  # callbacks of 1 GiB each, the most one may have
    callbacks = "".join(f"  - {{name: c{i}, executor: ex, trigger: {{timer_ms: 100}}, cpu_us: 100, "
                        f"memory: {{working_set_kb: 1048576, pattern: stream}}}}\n" for i in range(count))
    chains = "".join(f"  - {{name: c{i}, priority: {i + 1}, path: [c{i}]}}\n" for i in range(count))
    path = workload(tmp_path, "big", f"executors:\n  - {{name: ex, core: 0, priority: 50}}\ncallbacks:\n"
                                     f"{callbacks}chains:\n{chains}")
    proc = rtaccel("run", path, "--duration", "1", "--out", str(tmp_path / "out"), check=2)
    assert re.search(rf"workload 'big': the callbacks' working sets take {count << 10} MiB in all, resident for "
                     r"the whole run, more than half of the \d+ MiB of memory available to the run", proc.stderr), \
        proc.stderr


def test_a_run_whose_server_dies_ends_and_writes_its_results_up_to_then(tmp_path):
    out = tmp_path / "out"
    proc, runner = start_rtaccel_run(tmp_path, out)
    try:
        server = [p for p in children_of(runner)
                  if b"rtaccel-server" in pathlib.Path(f"/proc/{p}/cmdline").read_bytes()]
        assert len(server) == 1
        os.kill(server[0], signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 3, stderr
    assert f"rtaccel-server exited during the run; the results up to then are in {out}" in stderr, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed"] == "rtaccel-server exited during the run" and summary["duration_s"] < 30
    assert {c["chain"]: c for c in summary["chains"]}["h"]["count"] > 5
    assert trace_format.check(json.loads((out / "trace.json").read_text())) == []
    assert "THE RUN ENDED AT" in stdout and "# results: " in stdout, stdout


def test_a_core_outside_the_runs_cpuset_is_refused_with_its_line(tmp_path):
    # In a container with --cpuset-cpus 0 (a cgroup's cpuset), pinning the
    # accelerator's and the server's threads to core 1 fails. Before, the
    # run said only "callback 'logger': service 'matmul' failed on the
    # device" and exited 3.
    with cpuset_of("0") as procs:
        proc = rtaccel("run", str(ROOT / "examples" / "quickstart.yaml"), "--duration", "1", "--out",
                       str(tmp_path / "out"), "--quiet", preexec_fn=lambda: procs.write_text(str(os.getpid())))
    assert proc.returncode == 2, proc.stderr
    assert "examples/quickstart.yaml:9:7: accelerator 'acc0': core 1 is not one this run may use\n" in proc.stderr
    assert "examples/quickstart.yaml:10:9: server: core 1 is not one this run may use\n" in proc.stderr
    assert "(the cores it may use: 0; the others are offline or outside its cpuset" in proc.stderr, proc.stderr


def test_bad_workload_is_reported_with_its_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(HEAD.format(name="bad") + "executors:\n  - {name: ex, core: 0, priority: 500}\n")
    proc = rtaccel("run", str(path), check=2)
    assert f"{path}:9:35: executor 'ex': priority must be between 1 and 99" in proc.stderr


def test_bad_arguments_are_refused():
    # `rtaccel run` and rtaccel-exec refuse a value alike: one table's
    # parser (src/exec/run_options.h) checks both.
    assert "--policy takes ros2, picas, paam, not 'fifo'" in rtaccel("run", "x.yaml", "--policy", "fifo",
                                                                     check=2).stderr
    assert "seconds" in rtaccel("run", "x.yaml", "--duration", "-1", check=2).stderr
    proc = subprocess.run([str(EXEC), "x.yaml", "--policy", "fifo"], capture_output=True, text=True)
    assert proc.returncode == 2 and "bad --policy (ros2, picas, paam) 'fifo'" in proc.stderr
    assert "--shim takes modes of the interposer" in rtaccel("run", "x.yaml", "--shim", "trace,fast", check=2).stderr
    proc = subprocess.run([str(EXEC), "x.yaml", "--shim", "pi,,boost"], capture_output=True, text=True)
    assert proc.returncode == 2 and "bad --shim" in proc.stderr


def test_a_run_that_fails_under_the_interposer_says_why_and_nothing_else(tmp_path):
    # The run stops while it sizes the kernels, before it has made its result
    # folder; the interposer's report of the runner still has a place.
    path = workload(tmp_path, "plugin", one_segment_chain("mine", 100))
    out = tmp_path / "out"
    proc = rtaccel("run", path, "--shim", "trace", "--duration", "1", "--out", str(out), "--quiet", check=2)
    assert proc.stderr.strip().splitlines() == [
        "rtaccel-exec: callback 'a': service 'mine': rtaccel run sizes only the built-in services busy, vecadd, "
        "matmul, reduction, histogram"], proc.stderr
    assert list((out / "shim").glob("rtaccel-shim.*.json"))


def test_admission_refusal_names_the_chain(tmp_path):
    path = workload(tmp_path, "late", """executors:
  - {name: ex, core: 0, priority: 50}
callbacks:
  - {name: a, executor: ex, trigger: {timer_ms: 10}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 9000}]}
  - {name: b, executor: ex, trigger: {timer_ms: 10}, cpu_us: 1000, segments: [{accelerator: acc0, service: busy, wcet_us: 9000}]}
chains:
  - {name: a, priority: 2, path: [a]}
  - {name: b, priority: 1, path: [b]}
""")
    proc = rtaccel("run", path, "--duration", "1", "--out", str(tmp_path / "out"), "--quiet")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "refused" in proc.stderr and "chain '" in proc.stderr


def test_a_chain_without_a_bound_says_why(tmp_path):
    # fuse waits for th, whose publisher lies only on a chain started by a
    # subscription: nothing bounds when it comes.
    path = workload(tmp_path, "fusion", """executors:
  - {name: ex, core: 0, priority: 50}
callbacks:
  - {name: a, executor: ex, trigger: {timer_ms: 20}, publishes: ta, cpu_us: 500}
  - {name: s, executor: ex, trigger: {timer_ms: 20}, publishes: ts, cpu_us: 200}
  - {name: h, executor: ex, trigger: {topic: ts}, publishes: th, cpu_us: 200}
  - {name: fuse, executor: ex, trigger: {topics: [ta, th]}, cpu_us: 500}
chains:
  - {name: fused, priority: 3, path: [a, fuse], critical: false}
  - {name: s, priority: 2, path: [s]}
  - {name: h, priority: 1, period_ms: 20, path: [h]}
""")
    # Under paam the server's admission refuses the critical chains without
    # a bound, as the run's analysis finds them (h's timer, in the server's
    # model of it, is not released with the others); picas runs them.
    refused = rtaccel("run", path, "--duration", "1", "--out", str(tmp_path / "refused"), check=1)
    assert "chain 'h': relies on chain 'fused', which has no bound" in refused.stderr, refused.stderr
    proc = rtaccel("run", path, "--policy", "picas", "--duration", "1", "--out", str(tmp_path / "out"), check=RAN)
    chains = {c["chain"]: c for c in json.loads((tmp_path / "out" / "summary.json").read_text())["chains"]}
    why = "waits at 'fuse' for 'th', whose publisher no chain from a timer reaches without a fusion before it"
    assert chains["fused"]["wcrt_us"] is None and chains["fused"]["no_bound"] == why
    assert chains["fused"]["count"] > 0
    assert f"# fused: no bound: {why}" in proc.stdout
    # s counts fused's activations on their executor, which now come when
    # th does: its bound goes with fused's.
    assert chains["s"]["no_bound"] == "relies on chain 'fused', which has no bound"


MEMORY = """executors:
  - {name: ex, core: 0, priority: 50}
callbacks:
  # Its work is its whole WCET, calibrated as the fastest of several trials:
  # it runs over the WCET in some instance of many, and the monitor says so.
  - {name: tight, executor: ex, trigger: {timer_ms: 10}, cpu_us: 1000, work_us: 1000}
  - {name: walker, executor: ex, trigger: {timer_ms: 20}, cpu_us: 20000, work_us: 1000,
     memory: {working_set_kb: 4096, pattern: random}}
chains:
  - {name: tight, priority: 2, path: [tight]}
  - {name: walker, priority: 1, path: [walker]}
"""


@pytest.mark.slow
def test_the_monitor_checks_every_callback_against_its_wcet(tmp_path):
    summary, _ = run(workload(tmp_path, "memory", MEMORY), "picas", tmp_path / "out")
    a = summary["assumptions"]
    cbs = {c["callback"]: c for c in a["callbacks"]}
    assert cbs["walker"]["working_set_kb"] == 4096 and cbs["tight"]["working_set_kb"] == 0
    # The walk's CPU time is about its work: far from its 20 ms WCET.
    assert 0 < cbs["walker"]["max_us"] < 10000 and cbs["walker"]["over"] == 0
    assert cbs["tight"]["count"] > 100 and cbs["tight"]["over"] > 0
    # As many decimals as it takes for the overrun to show: 1.0 or 1.00 ms.
    assert any(re.match(r"callback tight ran up to [\d.]+ ms of CPU against a WCET of 1\.0+ ms", b)
               for b in a["broken"]), a["broken"]
    assert {c["core"] for c in a["cores"]} == {0}
    # acc0's core, watched as the executors' are.
    assert [(c["accelerator"], c["core"]) for c in a["accelerator_cores"]] == [("acc0", 1)]
    assert all(c["lost_in_overruns_ms"] <= c["irq_ms"] + c["softirq_ms"] + c["steal_ms"] + 1e-9
               for c in a["accelerator_cores"]), a["accelerator_cores"]
    # Timers against the declared 1 ms release jitter, where their core was
    # free at the release; every callback's time off its core.
    assert a["releases"] and all(r["jitter_us"] == 1000 and r["count"] > 0 for r in a["releases"]), a["releases"]
    assert {o["callback"] for o in a["off_core"]} == {"walker", "tight"}
    assert a["unexplained_violations"] == 0
    doc = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert trace_format.check(doc) == []
    trace = doc["traceEvents"]
    slices = [e for e in trace if e.get("cat") == "callback" and e["name"] == "walker"]
    assert slices and all(e["args"]["wcet_us"] == 20000 and e["args"]["cpu_us"] > 0 for e in slices)
    # Each overrun the monitor counted is marked on the timeline, over its span.
    marks = [e for e in trace if e.get("cat") == "monitor" and e["ph"] == "b" and e["name"] == "over WCET: tight"]
    assert len(marks) == cbs["tight"]["over"]
    assert all(m["args"]["cpu_us"] > m["args"]["wcet_us"] == 1000 for m in marks), marks[:3]
    assert {e["name"] for e in trace if e.get("ph") == "C" and e["name"].endswith(" lost (us)")} == \
        {"core 0 lost (us)", "core 1 lost (us)"}
    # The machine's speed, probed every 20 ms of the 2 s run, against the
    # calibration at its start.
    speed = a["speed"]
    assert speed["samples"] >= 50 and 0 < speed["slowest"] <= speed["p50"] < 1.5, speed
    probes = [e for e in trace if e.get("ph") == "C" and e["name"] == "machine speed (x calibrated)"]
    assert len(probes) == speed["samples"]


def test_isolation_without_a_section_is_refused(tmp_path):
    proc = rtaccel("run", workload(tmp_path, "plain", TWO_TIMERS), "--isolation", "--duration", "1",
                   "--out", str(tmp_path / "out"), check=2)
    assert "has no isolation section" in proc.stderr


def test_best_effort_programs_are_watched_and_one_that_cannot_start_ends_the_run(tmp_path):
    path = workload(tmp_path, "plain", TWO_TIMERS)
    # ENV's PATH has no virtual environment, as under sudo: `rtaccel` is
    # still this installation's.
    out = tmp_path / "ok"
    proc = rtaccel("run", path, "--duration", "1", "--out", str(out), "--quiet",
                   "--best-effort", "rtaccel membench read --size 1M --json", "--best-effort", "true", check=RAN)
    hog, short = json.loads((out / "summary.json").read_text())["best_effort"]
    assert hog["ended"] is None and hog["ended_s"] is None
    assert json.loads((out / "best_effort_0.log").read_text().splitlines()[-1])["mb_per_s"] > 0
    assert short["ended"] == "exited with status 0" and 0 <= short["ended_s"] < 1
    assert "warning: best-effort program 'true' exited with status 0" in proc.stderr
    assert "best-effort program 'true' exited with status 0" in proc.stdout  # the table's notes
    # A command the shell cannot find is a mistake: the run ends and says so.
    started = time.monotonic()
    proc = rtaccel("run", path, "--duration", "30", "--out", str(tmp_path / "bad"), "--quiet",
                   "--best-effort", "no-such-program --flag", check=2)
    assert time.monotonic() - started < 20
    assert "best-effort program 'no-such-program --flag' exited with status 127" in proc.stderr
    assert "not found" in proc.stderr


def test_a_best_effort_program_that_is_stopped_is_said_while_the_run_goes_and_in_its_summary(tmp_path):
    # A stopped co-runner is load the run goes without, as one that ended
    # is. Before, nothing said so. Each program stops itself; the test
    # continues the first once the run has said it stopped, and leaves the
    # second stopped to the run's end.
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "rtaccel.cli", "run", workload(tmp_path, "plain", TWO_TIMERS),
                             "--duration", "60", "--out", str(out), "--quiet",
                             "--best-effort", "kill -STOP $$; echo continued; exec sleep 60",
                             "--best-effort", "kill -STOP $$; echo never"],
                            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = []

    def said_line(pattern, seconds=30):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if select.select([proc.stderr], [], [], 0.5)[0]:
                line = proc.stderr.readline()
                said.append(line)
                if m := re.search(pattern, line):
                    return m
        return None

    try:
        stopped = said_line(r"best-effort program 'kill -STOP \$\$; echo continued; exec sleep 60': sh \(pid (\d+)\) "
                            r"stopped [\d.]+ s into the run .*its load is absent while it stays stopped")
        assert stopped, said
        pid = int(stopped[1])
        assert state_of(pid) == "T"
        os.kill(pid, signal.SIGCONT)
        assert said_line(rf"best-effort program 'kill -STOP \$\$; echo continued; exec sleep 60': sh \(pid {pid}\) "
                         r"no longer stopped [\d.]+ s into the run, after up to [\d.]+ s"), said
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, said + [stderr]  # interrupted, its results written
    first, second = json.loads((out / "summary.json").read_text())["best_effort"]
    assert [(s["process"], s["pid"], s["until_s"] is None) for s in first["stopped"]] == [("sh", pid, False)]
    assert 0 <= first["stopped"][0]["from_s"] <= first["stopped"][0]["until_s"]
    assert [(s["process"], s["until_s"]) for s in second["stopped"]] == [("sh", None)]
    # The time stopped, counted by the runner over every stop, kept or not.
    summary = json.loads((out / "summary.json").read_text())
    assert first["stopped_s"] == pytest.approx(first["stopped"][0]["until_s"] - first["stopped"][0]["from_s"], abs=1e-6)
    assert second["stopped_s"] == pytest.approx(summary["duration_s"] - second["stopped"][0]["from_s"], abs=1e-6)
    assert (out / "best_effort_0.log").read_text() == "continued\n"
    assert (out / "best_effort_1.log").read_text() == ""  # ended by the run, still stopped
    assert "best-effort program 'kill -STOP $$; echo never' had processes stopped for" in stdout
    assert ", to its end (1 stop(s)): part or all of its load was absent meanwhile" in stdout
    # And the timeline: a track per program, a slice over each stop.
    doc = json.loads((out / "trace.json").read_text())
    assert trace_format.check(doc) == []
    events = doc["traceEvents"]
    process = next(e["pid"] for e in events if e["ph"] == "M" and e["args"]["name"] == "best-effort programs")
    stops = sorted((e["tid"], e["name"], e["args"]["continued"]) for e in events
                   if e["pid"] == process and e["ph"] == "X")
    assert stops == [(0, f"stopped: sh (pid {pid})", True),
                     (1, f"stopped: sh (pid {second['stopped'][0]['pid']})", False)]


@pytest.mark.slow
def test_a_best_effort_supervisor_stopped_from_outside_still_ends_its_program_with_the_run(tmp_path):
    # `kill -TSTP` to a best-effort program's supervisor stops it and its
    # program. Before, the run's SIGTERM waited for a continue that never
    # came, its SIGKILL ended the supervisor alone, and a program that
    # ignores hang-ups ran on.
    marker, out = tmp_path / "supervisor.pid", tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "rtaccel.cli", "run", workload(tmp_path, "plain", TWO_TIMERS),
                             "--duration", "60", "--out", str(out), "--quiet",
                             "--best-effort", f"echo $PPID > {marker}.new; mv {marker}.new {marker}; "
                                              "trap '' HUP; exec sleep 600"],
                            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    program = None
    try:
        assert wait_until(marker.exists, 30), "the best-effort program did not start"
        supervisor = int(marker.read_text())
        assert wait_until(lambda: command_of(next(iter(children_of(supervisor)), 0)).startswith("sleep"), 10)
        program = children_of(supervisor)[0]
        os.kill(supervisor, signal.SIGTSTP)
        assert wait_until(lambda: state_of(supervisor) == "T" and state_of(program) == "T", 10)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr
        assert wait_gone([supervisor, program], 5) == []
    finally:
        end_left(proc, program)


def test_a_run_that_ends_before_it_began_ends_its_best_effort_programs(tmp_path):
    # The run waits for its executors, whose server (a socket that takes
    # them and never answers) keeps them from getting ready; its best-effort
    # program has started, and the run is interrupted. Before, the runner's
    # children were killed outright on that way out, the program's
    # supervisor with them, and a program that ignores hang-ups ran on
    # (as after an admission refusal, which `rtaccel demo` retries).
    path = workload(tmp_path, "mute", one_segment_chain("busy", 10))
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    mute.bind(str(tmp_path / "server.sock"))
    mute.listen(16)
    marker, program = tmp_path / "program.pid", None
    proc = subprocess.Popen([str(EXEC), path, "--policy", "paam", "--socket", str(tmp_path / "server.sock"),
                             "--duration", "5", "--out", str(tmp_path / "out"), "--quiet",
                             "--best-effort", f"echo $$ > {marker}.new; mv {marker}.new {marker}; "
                                              "trap '' HUP; exec sleep 600"],
                            cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(marker.exists, 30), "the best-effort program did not start"
        program = int(marker.read_text())
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        # An interrupted run of no time, with its results.
        assert proc.returncode == 130, stderr
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        assert summary["interrupted"] and summary["duration_s"] == 0, summary
        assert wait_gone([program], 5) == [], f"the best-effort program ({command_of(program)}) ran on"
    finally:
        mute.close()
        end_left(proc, program)


def test_a_run_whose_command_line_is_not_utf8_writes_results_that_json_readers_take(tmp_path):
    # A workload file and a best-effort command named in Latin-1. Before,
    # the runner threw on writing them into summary.json and aborted,
    # leaving no results.
    path = tmp_path / os.fsdecode(b"caf\xe9.yaml")
    path.write_text(pathlib.Path(workload(tmp_path, "plain", TWO_TIMERS)).read_text())
    out = tmp_path / "out"
    rtaccel("run", str(path), "--duration", "1", "--out", str(out), "--quiet",
            "--best-effort", os.fsdecode(b"echo caf\xe9; exec sleep 60"), check=RAN)
    summary = json.loads((out / "summary.json").read_bytes().decode("utf-8"))
    assert summary["workload"]["file"].endswith("caf\ufffd.yaml")
    assert summary["best_effort"][0]["command"] == "echo caf\ufffd; exec sleep 60"
    doc = json.loads((out / "trace.json").read_bytes().decode("utf-8"))
    assert trace_format.check(doc) == []
    assert (out / "best_effort_0.log").read_bytes() == b"caf\xe9\n"  # the program's own bytes


@pytest.mark.slow
@pytest.mark.parametrize("given", ["stdin", "process-substitution"])
def test_a_workload_given_through_a_pipe_is_run_and_kept_with_the_results(tmp_path, given):
    # `gen_workload | rtaccel run /dev/stdin`, `rtaccel run <(gen_workload)`.
    # Before, the check before the run read the pipe, and the runner found
    # it empty (`the workload is empty`) or closed (`/dev/fd/63: cannot open
    # the file`).
    text = pathlib.Path(workload(tmp_path, "piped", TWO_TIMERS)).read_text()
    out = tmp_path / "out"
    command = [sys.executable, "-m", "rtaccel.cli", "run", "--duration", "1", "--out", str(out), "--quiet"]
    if given == "stdin":
        proc = subprocess.run(command + ["/dev/stdin"], input=text, capture_output=True, text=True,
                              cwd=ROOT, timeout=300, env=ENV)
    else:
        (tmp_path / "gen.sh").write_text(f"cat <<'EOF'\n{text}EOF\n")
        proc = subprocess.run(["bash", "-c", f'"$@" <(sh {tmp_path / "gen.sh"})', "bash", *command],
                              capture_output=True, text=True, cwd=ROOT, timeout=300, env=ENV)
    assert proc.returncode in RAN, proc.stderr
    kept = out / "workload.yaml"
    assert kept.read_text() == text
    assert json.loads((out / "summary.json").read_text())["workload"]["file"] == str(kept)
    assert f"{kept} (the workload read from /dev/" in proc.stdout
    # Its errors name the pipe, with their lines.
    proc = subprocess.run(command + ["/dev/stdin"], input="version: 1\nname: x\nchians: []\n",
                          capture_output=True, text=True, cwd=ROOT, timeout=60, env=ENV)
    assert proc.returncode == 2 and "/dev/stdin:3:1: workload: unknown key 'chians'" in proc.stderr
    if given == "stdin":  # and `rtaccel bench bounds`, which runs each workload as `rtaccel run` does
        proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", "bench", "bounds", "/dev/stdin", "--duration",
                               "1", "--out", str(tmp_path / "bounds"), "--quiet", "--json"], input=text,
                              capture_output=True, text=True, cwd=ROOT, timeout=300, env=ENV)
        assert proc.returncode == 0, proc.stderr
        [run] = json.loads(proc.stdout)["workloads"]
        assert run["workload"] == str(tmp_path / "bounds" / "workload-1.yaml") and run["chains"]


def test_the_table_counts_the_time_while_any_process_was_stopped_once():
    # make -j2 stopped whole: its processes' stops overlap.
    program = {"stopped": [{"process": "make", "pid": 1, "from_s": 2.0, "until_s": 5.0},
                           {"process": "cc1", "pid": 2, "from_s": 3.0, "until_s": 4.0},
                           {"process": "cc1", "pid": 3, "from_s": 4.5, "until_s": 6.0},
                           {"process": "sh", "pid": 4, "from_s": 8.0, "until_s": None}],
               "stops_not_kept": 2}
    assert stops_line(program, 10.0) == ("had processes stopped for 6.0 s of the run, from 2.0 s on, to its end "
                                         "(6 stop(s)): part or all of its load was absent meanwhile")
    # Past the stops the summary keeps, the runner's count of the time.
    assert stops_line(dict(program, stopped_s=7.5), 10.0).startswith("had processes stopped for 7.5 s of the run")
    assert stops_line({"stopped": []}, 10.0) is None and stops_line({}, 10.0) is None


PIPELINE = """executors:
  - {name: ex, core: 0, priority: 50}
callbacks:
  - {name: sensor, executor: ex, trigger: {timer_ms: 20}, publishes: raw, cpu_us: 1000,
     segments: [{accelerator: acc0, service: busy, wcet_us: 1000}]}
  - {name: filter, executor: ex, trigger: {topic: raw}, cpu_us: 500}
chains:
  - {name: hot, priority: 2, path: [sensor, filter]}
"""


@pytest.mark.slow
def test_bench_bounds_sets_each_critical_chains_bound_against_its_longest_instance(tmp_path):
    examples = tmp_path / "examples"
    examples.mkdir()
    workload(examples, "pipeline", PIPELINE)
    (examples / "gpu.yaml").write_text((ROOT / "examples" / "paam_case_study_1_cuda.yaml").read_text())
    proc = rtaccel("bench", "bounds", "--examples", str(examples), "--duration", "1", "--out",
                   str(tmp_path / "out"), "--quiet", "--json", check=0)
    result = json.loads(proc.stdout)
    gpu, pipeline = result["workloads"]  # in name order
    assert gpu["skipped"].startswith("its accelerator is on the cuda backend"), gpu
    [hot] = pipeline["chains"]
    summary = json.loads((tmp_path / "out" / "pipeline" / "summary.json").read_text())
    assert summary["policy"] == "paam"
    assert hot["chain"] == "hot" and hot["bound_us"] == summary["chains"][0]["wcrt_us"]
    assert hot["bound_over_max"] == pytest.approx(hot["bound_us"] / hot["max_us"])
    # The run's own counts, whatever this machine did to it.
    assert hot["instances"] == summary["chains"][0]["count"] > 20
    assert hot["over_bound"] == summary["chains"][0]["over_bound"]
    assert hot["unexplained"] == summary["chains"][0].get("unexplained", 0)
    goal = result["goal"]
    assert goal["unexplained"] == hot["unexplained"]
    assert goal["loose"] == (["pipeline/hot"] if hot["bound_over_max"] > 2 else [])
    assert goal["violated"] == (["pipeline/hot"] if hot["over_bound"] else [])
    assert goal["met"] == (not goal["loose"] and not goal["violated"])
    table = rtaccel("bench", "bounds", "--examples", str(examples), "--duration", "1", "--out",
                    str(tmp_path / "again"), "--quiet", check=0).stdout
    assert "gpu                          left out: its accelerator is on the cuda backend" in table
    assert "# goal: every critical chain's bound at most 2x its maximum" in table


def test_bench_bounds_counts_a_critical_chain_without_a_bound_against_the_goal(tmp_path, monkeypatch):
    from rtaccel import runner

    # The run as rtaccel-exec leaves it: one critical chain the analysis
    # could not bound, one bounded within 2x, a non-critical one.
    def made_run(workload, policy, duration_s, folder, progress=True):
        pathlib.Path(folder).mkdir(parents=True)
        chains = [{"chain": "a", "critical": True, "wcrt_us": None, "max_us": 9000.0, "over_bound": None,
                   "bound_held": None},
                  {"chain": "b", "critical": True, "wcrt_us": 15000.0, "max_us": 10000.0, "over_bound": 0,
                   "bound_held": True},
                  {"chain": "c", "critical": False, "wcrt_us": 90000.0, "max_us": 1000.0, "over_bound": 0,
                   "bound_held": True}]
        for c in chains:
            c.update(count=50, deadline_misses=0, drops=0, deadline_us=100000.0, p50_us=500.0, p99_us=900.0)
        (pathlib.Path(folder) / "summary.json").write_text(json.dumps(
            {"format_version": 1, "policy": policy, "workload": {"name": "quickstart"}, "duration_s": duration_s,
             "chains": chains, "assumptions": {}}))
        return 0

    monkeypatch.setattr(runner, "run", made_run)
    status, result = runner.bounds_over_maxima([str(ROOT / "examples" / "quickstart.yaml")], 1, str(tmp_path))
    assert status == 0
    a, b = result["workloads"][0]["chains"]
    assert a["bound_us"] is None and a["bound_over_max"] is None
    assert b["bound_over_max"] == pytest.approx(1.5)
    assert result["goal"]["loose"] == ["quickstart/a"] and not result["goal"]["met"]
    table = runner.format_bounds_over_maxima(result)
    assert "no bound" in table and "looser than that or unbounded: quickstart/a" in table


@pytest.mark.slow
def test_one_timeline_a_flow_per_chain_instance_through_its_slices(tmp_path):
    summary, _ = run(workload(tmp_path, "pipeline", PIPELINE), "paam", tmp_path / "out")
    # The monitor: every request's server overhead against the workload's
    # 50 us epsilon.
    [requests] = summary["assumptions"]["requests"]
    assert requests["callback"] == "sensor" and requests["epsilon_us"] == 50.0
    assert requests["count"] > 50 and 0 < requests["p99_us"] <= requests["max_us"], requests
    doc = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert trace_format.check(doc) == []
    events = doc["traceEvents"]
    slices = [e for e in events if e.get("ph") == "X"]
    flows = {}
    for e in events:
        if e.get("ph") in ("s", "t", "f"):
            flows.setdefault(e["id"], []).append(e)
    assert len(flows) > 50  # one per instance of about 100 in 2 s
    for steps in list(flows.values())[:20]:
        assert all(s["name"] == "chain hot" for s in steps)
        # From the sensor's callback through its kernel on the accelerator to
        # the filter: the slice each step starts.
        names = []
        for s in steps:
            at = [x for x in slices if x["pid"] == s["pid"] and x["tid"] == s["tid"] and x["ts"] == s["ts"]]
            names.append((at[0]["cat"], at[0]["name"]))
        assert names == [("callback", "sensor"), ("kernel", "sensor: busy"), ("callback", "filter")], names


def test_an_interposer_whose_path_has_a_space_goes_into_every_program_of_the_run(tmp_path):
    # A virtualenv under "My Projects": the dynamic linker splits LD_PRELOAD
    # at spaces. Before, it refused the two halves of the path, and the run
    # failed.
    lib = tmp_path / "my lib" / "librtaccel_shim.so"
    lib.parent.mkdir()
    shutil.copy(ROOT / "python" / "rtaccel" / "lib" / "librtaccel_shim.so", lib)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "rtaccel.cli", "run", workload(tmp_path, "pipeline", PIPELINE),
                           "--duration", "1", "--out", str(out), "--quiet", "--shim", "pi"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env=dict(ENV, RTACCEL_SHIM_LIB=str(lib)))
    assert proc.returncode in RAN, proc.stderr
    assert "ld.so" not in proc.stderr
    procs = {p["process"] for p in json.loads((out / "summary.json").read_text())["shim"]["processes"]}
    assert procs == {"runner", "server", "executor ex"}


@pytest.mark.slow
def test_the_interposer_in_a_run_traces_its_programs_on_the_run_timeline(tmp_path):
    out = tmp_path / "out"
    rtaccel("run", workload(tmp_path, "pipeline", PIPELINE), "--duration", "2", "--out", str(out),
            "--quiet", "--shim", "pi", "--best-effort", "env; exec sleep 60", check=RAN)
    summary = json.loads((out / "summary.json").read_text())
    shim = summary["shim"]
    assert shim["modes"] == "trace,pi"
    procs = {p["process"]: p for p in shim["processes"]}
    assert set(procs) == {"runner", "server", "executor ex"}, procs
    for p in procs.values():
        assert (out / "shim" / p["report"]).is_file(), p
    # The executor takes its queue's lock for every message it passes itself.
    assert procs["executor ex"]["acquisitions"] >= 2 * summary["timers"][0]["activations"]
    # Each program's timeline on the run's, under its own name, on its clock.
    doc = json.loads((out / "trace.json").read_text())
    assert trace_format.check(doc) == []
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e.get("ph") == "M" and e["name"] == "process_name"}
    for name, p in procs.items():
        assert f"shim: {name} (pid {p['pid']})" in names.values(), names
    shim_pids = {pid for pid, name in names.items() if name.startswith("shim: ")}
    end_us = (summary["duration_s"] + 30) * 1e6
    assert all(-30e6 < e["ts"] < end_us for e in doc["traceEvents"]
               if e["pid"] in shim_pids and "ts" in e)
    # The load beside the workload is not the run's: it runs without the interposer.
    env = (out / "best_effort_0.log").read_text()
    assert "PATH=" in env and "RTACCEL_SHIM" not in env and "librtaccel_shim" not in env
    # The reports are the interposer's own: lockstat reads the folder.
    report = rtaccel("lockstat", str(out / "shim"), check=0)
    assert "executor" in report.stdout or "rtaccel-exec" in report.stdout, report.stdout
    # The GPU campaign's check of a run's one timeline: the run's own sources
    # found, and one it asks for that a cpu run cannot have (CUDA) missed.
    check = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu" / "timeline.py"), str(out),
                            "--require", "callback,kernel,cuda"], capture_output=True, text=True, timeout=120)
    found = json.loads(check.stdout)
    assert check.returncode == 1 and found["missing"] == ["cuda"], check.stdout + check.stderr
    assert found["format_problems"] == 0 and found["chain_instances_with_flow"] > 0
    assert set(found["shim_cuda_calls"]) == set(procs)

