"""Fuzzing of the Python entry point of the loader: whatever bytes a workload
file holds, `rtaccel analyze` answers with an exit status (0, 1 or 2) and, on
bad input, messages; it never raises. The seed is a shipped example, valid
as it stands, and one strategy changes only its numbers, so that most inputs
get through the loader into the analysis."""

import contextlib
import io
import random
import re

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
