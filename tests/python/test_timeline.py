"""rtaccel cut: a part of a run's timeline (rtaccel/timeline.py), on traces
made here event by event; test_run.py cuts a real run's."""

import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys

import pytest
import trace_format
from hypothesis import HealthCheck, given, settings, strategies as st
from rtaccel import cli, timeline
from rtaccel.commands.run import BROWSER_TRACE_MB, large_trace_hint

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(ROOT / "python"), "PATH": "/usr/bin:/bin"}

MS = 1000.0  # trace time is in us


def meta(pid, name):
    return {"ph": "M", "name": "process_name", "pid": pid, "args": {"name": name}}


def slice_(name, ts_ms, dur_ms, pid=1):
    return {"ph": "X", "cat": "callback", "name": name, "pid": pid, "tid": 0, "ts": ts_ms * MS,
            "dur": dur_ms * MS}


def counter(ts_ms, value, name="core 0 lost (us)"):
    return {"ph": "C", "name": name, "pid": 9, "ts": ts_ms * MS, "args": {"steal": value}}


def pair(cat, id_, name, begin_ms, end_ms, pid=2):
    return [{"ph": "b", "cat": cat, "name": name, "id": id_, "pid": pid, "tid": 0, "ts": begin_ms * MS},
            {"ph": "e", "cat": cat, "name": name, "id": id_, "pid": pid, "tid": 0, "ts": end_ms * MS}]


def flow(id_, *at_ms):
    steps = []
    for i, at in enumerate(at_ms):
        ph = "s" if i == 0 else "f" if i == len(at_ms) - 1 else "t"
        steps.append({"ph": ph, "cat": "chain", "name": "chain c", "id": id_, "pid": 1, "tid": 0, "ts": at * MS})
    steps[-1]["bp"] = "e"
    return steps


# A run's trace as the runner orders it: metadata, slices, async slices,
# flows, counters, the monitor's marks.
EVENTS = [meta(1, "executor ex"), meta(2, "accelerator acc0"),
          slice_("before", 10, 5), slice_("across_start", 95, 10), slice_("inside", 120, 5),
          slice_("next", 130, 5), slice_("last", 150, 5), slice_("across_end", 195, 10), slice_("after", 300, 5),
          *pair("queue", 1, "queued inside", 130, 140), *pair("queue", 2, "queued across", 90, 110),
          *pair("queue", 3, "queued after", 250, 260),
          *flow(1, 120, 130, 150), *flow(2, 96, 120), *flow(3, 300, 302),
          counter(50, 1), counter(80, 2), counter(150, 3), counter(250, 4),
          counter(60, 7, name="machine speed (x calibrated)"),
          {"ph": "i", "name": "instant inside", "pid": 1, "tid": 0, "ts": 160 * MS, "s": "t"},
          {"ph": "i", "name": "instant after", "pid": 1, "tid": 0, "ts": 260 * MS, "s": "t"},
          *pair("monitor", 1, "over WCET: callback a", 20, 21, pid=20),
          *pair("monitor", 2, "over its bound: chain c", 400, 420, pid=20),
          *pair("monitor", 3, "over its bound, unexplained: chain c", 430, 440, pid=20)]


def write_lines(path, events):
    """As the runner writes trace.json: an event a line."""
    timeline.write(path, events)
    return path


def names(events):
    return [e.get("name") for e in events]


def test_a_window_keeps_what_overlaps_it_and_only_whole_pairs_and_flows(tmp_path):
    path = write_lines(tmp_path / "trace.json", EVENTS)
    kept = list(timeline.cut(timeline.events(path), [(100 * MS, 200 * MS)]))
    slices = [e["name"] for e in kept if e["ph"] == "X"]
    assert slices == ["across_start", "inside", "next", "last", "across_end"], slices
    assert [e for e in kept if e["ph"] == "M"] == EVENTS[:2]
    # An async slice's two ends go together, when the slice overlaps it.
    assert [e["name"] for e in kept if e["ph"] in "be"] == ["queued inside"] * 2 + ["queued across"] * 2
    # A flow only whole: flow 2 starts before the window.
    assert [(e["id"], e["ph"]) for e in kept if e.get("cat") == "chain"] == [(1, "s"), (1, "t"), (1, "f")]
    # Counters in it, and each counter's last value before it, so that its
    # track starts at its value.
    assert sorted((e["name"], e["args"]["steal"]) for e in kept if e["ph"] == "C") == [
        ("core 0 lost (us)", 2), ("core 0 lost (us)", 3), ("machine speed (x calibrated)", 7)]
    assert "instant inside" in names(kept) and "instant after" not in names(kept)
    assert trace_format.check({"traceEvents": kept}) == []


def test_over_bound_windows_are_the_instances_over_their_bounds_merged(tmp_path):
    path = write_lines(tmp_path / "trace.json", EVENTS)
    # Not the overrun marks: on a noisy machine they can fill the run.
    assert timeline.over_bound(path, 0) == [(400 * MS, 420 * MS), (430 * MS, 440 * MS)]
    assert timeline.over_bound(path, 5 * MS) == [(395 * MS, 445 * MS)]
    kept = list(timeline.cut(timeline.events(path), timeline.over_bound(path, 5 * MS)))
    assert [e["name"] for e in kept if e.get("cat") == "monitor"] == [
        "over its bound: chain c"] * 2 + ["over its bound, unexplained: chain c"] * 2


def test_a_trace_on_one_line_is_read_too(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": EVENTS, "displayTimeUnit": "ms"}) + "\n")
    assert list(timeline.events(path)) == EVENTS


@pytest.mark.parametrize("text, line, what", [
    ('{"traceEvents": [\n{"ph": "X", "ts": 1},\n{"ph": "X", "ts": \n]}\n', 3, "Expecting value"),
    ('{"traceEvents": [\n{"ph": "X", "ts": "soon"}\n]}\n', 2, "its ts is not a number"),
    ('{"traceEvents": [\n{"ph": "b", "ts": 1, "id": [1]}\n]}\n', 2, "its id is not a string or a number"),
    ('{"traceEvents": [\n[1, 2]\n]}\n', 2, "not an object"),
    ('{"traceEvents": [{"ph": "X", "dur": true}]}\n', 1, "its dur is not a number"),
    ("chain,start_us,latency_us\nc,1,2\n", 1, "not a JSON trace"),
    ('{"traceEvents": 3}\n', 1, "no traceEvents"),
])
def test_a_file_that_is_not_a_trace_is_named_with_its_line(tmp_path, text, line, what):
    path = tmp_path / "trace.json"
    path.write_text(text)
    with pytest.raises(timeline.Error) as err:
        list(timeline.events(path))
    assert str(err.value).startswith(f"{path}:{line}: not a trace event: ") and what in str(err.value)
    assert err.value.exit_code == 2


def cut(*args):
    return subprocess.run([sys.executable, "-m", "rtaccel.cli", "cut", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, env=ENV)


def test_the_command_writes_the_part_beside_the_trace_and_refuses_what_it_cannot_cut(tmp_path):
    write_lines(tmp_path / "trace.json", EVENTS)
    proc = cut(tmp_path, "--from", "0.1", "--to", "0.2")
    assert proc.returncode == 0, proc.stderr
    part = tmp_path / "trace-0.1-0.2s.json"
    assert proc.stdout == f"# 18 events of 0.1 s to 0.2 s: {part} (open in ui.perfetto.dev)\n"
    assert trace_format.check(json.loads(part.read_text())) == []
    proc = cut(tmp_path / "trace.json", "--over-bound", "-o", tmp_path / "ob.json")
    assert proc.returncode == 0 and "1 windows around the instances over their bounds (±50 ms)" in proc.stdout
    # Nothing over a bound: said, and nothing written.
    (tmp_path / "calm").mkdir()
    write_lines(tmp_path / "calm" / "trace.json", EVENTS[:-4])
    proc = cut(tmp_path / "calm", "--over-bound")
    assert proc.returncode == 0 and "no chain instance over its bound" in proc.stdout
    assert not (tmp_path / "calm" / "trace-over-bound.json").exists()
    # From a time to the end.
    proc = cut(tmp_path, "--from", "0.35")
    assert proc.returncode == 0 and f"of 0.35 s to the end: {tmp_path}/trace-from-0.35s.json" in proc.stdout
    assert [e["name"] for e in json.loads((tmp_path / "trace-from-0.35s.json").read_text())["traceEvents"]
            if e.get("cat") == "monitor"] == ["over its bound: chain c"] * 2 + [
        "over its bound, unexplained: chain c"] * 2
    for args, said in [((tmp_path / "nothing",), "no "), ((tmp_path,), "say which part"),
                       ((tmp_path, "--over-bound", "--to", "1"), "no --from or --to with it"),
                       ((tmp_path, "--from", "1", "-o", tmp_path / "trace.json"), "is the trace being cut"),
                       ((tmp_path, "--from", "2", "--to", "1"), "must come after"),
                       ((tmp_path, "--from", "soon"), "expected seconds"),
                       ((tmp_path, "--over-bound", "-3"), "margin must be in")]:
        proc = cut(*args)
        assert proc.returncode == 2 and said in proc.stderr, (args, proc.stderr)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "trace.json").write_bytes(b"\xff\xfe not text")
    proc = cut(tmp_path / "bad", "--from", "1")
    assert proc.returncode == 2 and proc.stderr == (
        f"rtaccel cut: {tmp_path}/bad/trace.json:1: not a trace event: not UTF-8 text (byte 0xff)\n"), proc.stderr
    # A device that never ends is not read.
    proc = cut("/dev/zero", "--from", "1", "-o", tmp_path / "zero-part.json")
    assert proc.returncode == 2 and proc.stderr == "rtaccel cut: /dev/zero: not a file, so not a trace\n"
    # A part that cannot be written, and one whose trace turns out bad
    # halfway: said, and nothing left behind.
    proc = cut(tmp_path, "--from", "0", "-o", tmp_path / "no" / "such" / "part.json")
    assert proc.returncode == 2 and proc.stderr == (
        f"rtaccel cut: cannot write {tmp_path}/no/such/part.json: No such file or directory\n"), proc.stderr
    (tmp_path / "halfway").mkdir()
    write_lines(tmp_path / "halfway" / "trace.json", EVENTS + [{"ph": "X", "ts": "late"}])
    proc = cut(tmp_path / "halfway", "--from", "0")
    assert proc.returncode == 2 and f"trace.json:{len(EVENTS) + 2}: not a trace event" in proc.stderr, proc.stderr
    assert not (tmp_path / "halfway" / "trace-from-0s.json").exists()
    (tmp_path / "folder" / "trace.json").mkdir(parents=True)
    proc = cut(tmp_path / "folder", "--from", "1")
    assert proc.returncode == 2 and proc.stderr.startswith("rtaccel cut: cannot read "), proc.stderr


def test_a_run_whose_trace_a_browser_cannot_open_says_how_to_cut_it(tmp_path):
    trace = tmp_path / "trace.json"
    trace.write_text("{}")
    assert large_trace_hint(str(tmp_path)) is None
    os.truncate(trace, (BROWSER_TRACE_MB + 44) << 20)  # sparse: nothing written
    assert large_trace_hint(str(tmp_path)) == (
        f"# trace.json is {BROWSER_TRACE_MB + 44} MB, more than a browser opens whole: "
        f"`rtaccel cut {tmp_path} --from S --to S` (or --over-bound) writes a part of it")


SEED = "".join(f"{json.dumps(e)},\n" for e in EVENTS).encode()
mutations = st.one_of(
    st.binary(max_size=400),
    st.tuples(st.integers(0, len(SEED)), st.binary(min_size=1, max_size=12)).map(
        lambda cut: SEED[:cut[0]] + cut[1] + SEED[cut[0]:]),
    st.tuples(st.integers(0, len(SEED)), st.sampled_from([b'"x"', b"[1]", b"{}", b"true", b"-1e400", b"null"])).map(
        lambda cut: SEED[:cut[0]] + cut[1] + SEED[cut[0]:]),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutations)
def test_whatever_a_trace_file_holds_cut_answers_and_never_raises(tmp_path, body):
    path = tmp_path / "trace.json"
    path.write_bytes(b'{"displayTimeUnit": "ms", "traceEvents": [\n' + body + b"\n]}\n")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["cut", str(path), "--from", "0.1", "--to", "0.2", "-o", str(tmp_path / "part.json")])
    assert code in (0, 2), (code, err.getvalue())
    if code == 2:
        assert err.getvalue().startswith(f"rtaccel cut: {path}:"), err.getvalue()
    else:
        assert json.loads((tmp_path / "part.json").read_text())["traceEvents"] is not None
