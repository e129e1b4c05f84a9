import pathlib
import signal
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

# Every test runs under the harness: nothing it starts or makes outlives it.
pytest_plugins = ["harness"]

# Under nohup the suite inherits SIGHUP ignored, and as a shell's background
# job without job control (`make test &` in a script) SIGINT and SIGQUIT;
# so would every program it starts, where the tests of hang-ups, Ctrl-C and
# the signals a best-effort program starts with need the dispositions a
# terminal's user has. A handler that does nothing keeps the suite as
# deaf to them as it was meant to be, and is reset to the default in each
# program it executes; an ignored signal is not.
import pytest  # noqa: E402
import summaries  # noqa: E402


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Each summary.json a test's runs wrote under its tmp_path, validated
    against the schema once the test has passed (summaries.py)."""
    result = yield  # a test that failed has failed already
    if "tmp_path" in getattr(item, "funcargs", {}):
        for path in summaries.written_by_runs(item.funcargs["tmp_path"]):
            summaries.check(path)
    return result


for _sig in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, lambda signum, frame: None)
