"""Fuzzing of the Python entry point of the loader: whatever bytes a workload
file holds, `rtaccel analyze` answers with an exit status (0, 1 or 2) and, on
bad input, messages; it never raises."""

import contextlib
import io

from hypothesis import HealthCheck, given, settings, strategies as st

from rtaccel import cli

SEED = (b"platform:\n  cores: 2\nexecutors:\n  - {name: e, core: 0, priority: 10}\n"
        b"callbacks:\n  - {name: t, executor: e, kind: timer, period_us: 1000, cpu_us: 10}\n"
        b"chains:\n  - {name: c, priority: 10, period_us: 1000, path: [t]}\n")


def run_analyze(path) -> tuple:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["analyze", str(path), "--no-calibration"])
    return code, err.getvalue()


mutations = st.one_of(
    st.binary(max_size=600),
    st.tuples(st.integers(0, len(SEED)), st.binary(min_size=1, max_size=8)).map(
        lambda cut: SEED[:cut[0]] + cut[1] + SEED[cut[0]:]),
    st.text(max_size=300).map(lambda t: t.encode("utf-8", "surrogatepass")),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=mutations)
def test_analyze_never_raises_whatever_the_file_holds(tmp_path, data):
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(data)
    code, err = run_analyze(path)
    assert code in (0, 1, 2)
    if code == 2:
        assert "error(s) in the workload" in err or "rtaccel:" in err
