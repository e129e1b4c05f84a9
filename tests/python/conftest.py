import pathlib
import signal
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

# Every test runs under the harness: nothing it starts or makes outlives it.
pytest_plugins = ["harness"]

# Under nohup the suite inherits SIGHUP ignored, and so would every program it
# starts, where the tests of hang-ups need the disposition a terminal's user
# has. A handler that does nothing keeps the suite alive as nohup meant, and
# is reset to the default in each program it executes; an ignored signal is
# not.
if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
    signal.signal(signal.SIGHUP, lambda signum, frame: None)
