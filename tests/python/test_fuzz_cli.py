"""Fuzzing of the Python entry points that read files: whatever bytes a
workload file holds, `rtaccel analyze` answers with an exit status (0, 1 or
2) and, on bad input, messages; it never raises. The seed is a shipped
example, valid as it stands, and one strategy changes only its numbers, so
that most inputs get through the loader into the analysis. Likewise
`rtaccel compare` with a run's summary, and `rtaccel lockstat` with the
interposer's report, whose values are changed or taken away."""

import contextlib
import copy
import io
import json
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import ROOT
from rtaccel import cli

SEED = (ROOT / "examples" / "quickstart.yaml").read_bytes()
NUMBERS = list(re.finditer(rb"(?<![\w.])\d+(?![\w.])", SEED))
TIMES = list(re.finditer(rb"(?<=_(?:us|ms): )\d+", SEED))  # the timings: *_us, *_ms


def run_analyze(path) -> tuple:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["analyze", str(path), "--no-calibration"])
    return code, out.getvalue(), err.getvalue()


def with_numbers(values, numbers=NUMBERS) -> bytes:
    """SEED with the Nth of its NUMBERS replaced by VALUES[N]."""
    out, at = [], 0
    for m, v in zip(numbers, values):
        out += [SEED[at:m.start()], str(v).encode()]
        at = m.end()
    return b"".join(out) + SEED[at:]


def check_answer(path, data):
    path.write_bytes(data)
    code, out, err = run_analyze(path)
    assert code in (0, 1, 2)
    if code == 2:
        assert "error(s) in the workload" in err or "rtaccel:" in err
    else:
        assert "# rtaccel analyze" in out and ("schedulable" in out or "NOT" in out), out
    return code


mutations = st.one_of(
    st.binary(max_size=600),
    st.tuples(st.integers(0, len(SEED)), st.binary(min_size=1, max_size=8)).map(
        lambda cut: SEED[:cut[0]] + cut[1] + SEED[cut[0]:]),
    st.lists(st.integers(-5, 10**9), min_size=len(NUMBERS), max_size=len(NUMBERS)).map(with_numbers),
    st.lists(st.integers(0, 10**7), min_size=len(TIMES), max_size=len(TIMES)).map(
        lambda values: with_numbers(values, TIMES)),
    st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
)


def test_the_seed_is_a_valid_workload(tmp_path):
    assert len(NUMBERS) >= 20 and len(TIMES) >= 8
    assert check_answer(tmp_path / "seed.yaml", SEED) == 0


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=mutations)
def test_analyze_never_raises_whatever_the_file_holds(tmp_path, data):
    check_answer(tmp_path / "fuzz.yaml", data)


def test_changed_numbers_reach_the_analysis(tmp_path):
    """Inputs that keep the seed's shape get past the loader: the fuzzing
    above exercises the analysis, not only the loader's first check."""
    rng = random.Random(7)
    codes = [check_answer(tmp_path / "numbers.yaml",
                          with_numbers([int(m.group()) * rng.choice((1, 2, 5, 20)) // rng.choice((1, 4))
                                        for m in TIMES], TIMES))
             for _ in range(60)]
    analyzed = sum(code in (0, 1) for code in codes)
    assert analyzed >= 20, codes
    assert 1 in codes and 0 in codes, codes


# --- the JSON files rtaccel reads back: a run's summary (compare), the ----
# --- interposer's report (lockstat) ----------------------------------------

# A summary with every part the comparison reads, as `rtaccel run` writes
# them: a chain over its bound with its explanation, a link that lost
# messages, a best-effort program that ended early, the processes' resources
# (one never sampled), a trace that filled.
SUMMARY = {
    "format_version": 1, "policy": "paam", "workload": {"name": "w", "file": "w.yaml"}, "duration_s": 10.0,
    "realtime": True, "critical_bounds_held": False, "isolation": {"cgroup": "rtaccel-run-1"},
    "failed": "an executor exited during the run",
    "chains": [
        {"chain": "hot", "critical": True, "count": 100, "deadline_misses": 1, "drops": 0, "link_losses": 2,
         "deadline_us": 100000.0, "wcrt_us": 20000.0, "p50_us": 9000.0, "p99_us": 19000.0, "max_us": 25000.0,
         "bound_held": False, "over_bound": 3, "explained_by": ["callback a ran over", "core 0 lost 5 ms"],
         "unexplained": 0, "unchecked": 1},
        {"chain": "log", "critical": False, "count": 0, "deadline_misses": 0, "drops": 0, "deadline_us": 500000.0,
         "wcrt_us": None, "p50_us": None, "p99_us": None, "max_us": None, "bound_held": None,
         "no_bound": "its callbacks share no executor"}],
    "links": [{"link": "eth0", "flow_control": True, "topics": [{"lost": 2, "first_loss_s": 4.5}]}],
    "best_effort": [{"command": "hog", "log": "best_effort_0.log", "ended": "exited with status 1", "ended_s": 2.0}],
    "resources": [{"process": "runner", "samples": 3, "descriptors": {"first": 3, "last": 4},
                   "rss_kb": {"first": 6000, "last": 9000}, "private_kb": {"first": 400, "last": 500},
                   "peak_kb": 14000},
                  {"process": "executor late", "pid": 9, "samples": 0}],  # ended before its first sample
    "assumptions": {"trace_filled": {"of": "executor 'ex'", "at_s": 3.0, "events": 64}, "callbacks": [{"over": 2}]},
    "walks": [{"working_set_kb": 64, "pattern": "random", "ns_per_line": 12.5}],
}

# An interposer's report with a contended lock, a lock destroyed while held,
# a pattern and CUDA calls, as the shim writes them.
LOCKSTAT = {
    "format": "rtaccel-lockstat", "version": 1, "pid": 7, "command": ["prog", "-x"],
    "modes": {"pi": True, "phase_fair": False, "boost": False}, "wait_events": 5,
    "locks": [
        {"id": 0, "kind": "mutex", "created_by": "init", "created_at": "prog+0x10", "destroyed_while_held": False,
         "acquisitions": 100, "contended": 5, "wait_ns_total": 5000, "wait_ns_max": 2000, "hold_ns_max": 900},
        {"id": 1, "kind": "rwlock", "created_by": "static_initializer", "created_at": "prog+0x20",
         "destroyed_while_held": True, "acquisitions": 0, "contended": 0, "wait_ns_total": 0, "wait_ns_max": 0,
         "hold_ns_max": 0}],
    "patterns": [{"function": "prog!work", "caller": "prog+0x30", "count": 4,
                  "ops": [{"op": "mutex_lock", "lock": 0}, {"op": "mutex_unlock", "lock": 0}]}],
    "cuda": {"calls": [{"api": "cudaMemcpy", "calls": 3, "errors": 0, "total_ns": 3000, "max_ns": 1500,
                        "lock_ops": 6, "locks": [0]}],
             "segments": {"count": 2, "total_ns": 4000, "max_ns": 2500}, "static_runtime": ["libfoo.so"]},
}

# Per command: its seed, the file name it reads, and what a refusal says.
READERS = {
    "compare": (SUMMARY, "summary.json", "summary.json: not the result of `rtaccel run`"),
    "lockstat": (LOCKSTAT, "rtaccel-shim.7.json", "rtaccel lockstat: "),
}


def paths(value, at=()):
    """Every place in VALUE: each key of each object and each item of each list."""
    yield at
    if isinstance(value, dict):
        for key, sub in value.items():
            yield from paths(sub, at + (key,))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from paths(sub, at + (i,))


DELETE = object()
values = st.one_of(st.none(), st.booleans(), st.integers(-2, 2**70), st.floats(), st.text(max_size=4),
                   st.just([]), st.just({}), st.just([None]), st.just(DELETE))


def changed(seed, edits):
    """SEED with each edit (place, value) made: the place's value replaced,
    or taken away."""
    places = list(paths(seed))[1:]
    doc = copy.deepcopy(seed)
    for place, value in edits:
        *parent, last = places[place % len(places)]
        try:
            holder = doc
            for key in parent:
                holder = holder[key]
            if value is DELETE:
                del holder[last]
            else:
                holder[last] = copy.deepcopy(value)  # a list drawn twice is two lists
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit took that place away
    return doc


def run_reader(command, folder, *extra) -> tuple:
    out, err = io.StringIO(), io.StringIO()
    name = READERS[command][1]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([command, *extra, str(folder if command == "compare" else folder / name)])
    return code, out.getvalue(), err.getvalue()


def test_the_seeds_are_read_whole(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(SUMMARY))
    code, out, err = run_reader("compare", tmp_path)
    assert code == 1 and not err, err  # a critical chain over its bound
    for said in ("hot", "link eth0 lost 2 messages", "best-effort program 'hog' exited", "GREW",
                 "THE RUN ENDED AT 10.0 s: an executor exited during the run",
                 "callback a ran over", "the trace of executor 'ex' filled", "no bound: its callbacks"):
        assert said in out, (said, out)
    # report: its plots' folder is made before they are drawn, or said.
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["report", str(tmp_path), "--out", "/proc/rtaccel"])
    assert code == 2 and err.getvalue() == (
        "rtaccel: cannot write the plots into /proc/rtaccel: No such file or directory\n"), err.getvalue()
    (tmp_path / "rtaccel-shim.7.json").write_text(json.dumps(LOCKSTAT))
    code, out, err = run_reader("lockstat", tmp_path)
    assert code == 0 and not err, err
    for said in ("pid 7: prog -x", "destroyed while held", "prog!work", "cudaMemcpy", "libfoo.so"):
        assert said in out, (said, out)


@pytest.mark.slow
@pytest.mark.parametrize("command", READERS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), values), min_size=1, max_size=4))
def test_a_reader_never_raises_whatever_the_file_holds(tmp_path, command, edits):
    seed, name, refusal = READERS[command]
    (tmp_path / name).write_text(json.dumps(changed(seed, edits), allow_nan=True))
    for extra in ((), ("--json",)):
        code, out, err = run_reader(command, tmp_path, *extra)
        assert code in (0, 1, 2), (code, err)
        if code == 2:
            assert refusal in err, err
