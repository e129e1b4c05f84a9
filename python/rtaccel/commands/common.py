"""What the command families share: argparse types that refuse bad values
with a clear message, the one way an error is reported, and how a result
is printed."""

from __future__ import annotations

import argparse
import errno
import json
import os
import resource
import signal
import sys
from pathlib import Path

from rtaccel import _core, inputs
from rtaccel.errors import EXIT_OK, EXIT_RUNTIME, Error


def fail(prog: str, err: Exception) -> int:
    """Reports ERR in one line; the exit status its kind means (errors.py)."""
    print(f"{prog}: {err}", file=sys.stderr)
    return err.exit_code if isinstance(err, Error) else EXIT_RUNTIME


def _examples_dir() -> Path:
    """The example workloads: inside an installed package, else in the checkout."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "examples", package.parents[1] / "examples"):
        if candidate.is_dir():
            return candidate
    return package / "examples"


EXAMPLES_DIR = _examples_dir()


def shipped_example(given: str) -> Path | None:
    """The example workload GIVEN names, as a bare name (quickstart), a file
    name (quickstart.yaml) or the checkout's path (examples/quickstart.yaml);
    None where it names none."""
    name = Path(given)
    if name.parent not in (Path("."), Path("examples")):
        return None
    path = EXAMPLES_DIR / (name.name if name.suffix == ".yaml" else name.name + ".yaml")
    return path if path.is_file() else None


def workload_file(given: str) -> str:
    """argparse type of a workload file: GIVEN, or where there is no such
    file and it names a shipped example, that example, said on stderr. An
    installed rtaccel's examples lie in its package, not where the user
    stands: `rtaccel analyze quickstart.yaml` works outside a checkout."""
    if os.path.lexists(given):
        return given
    example = shipped_example(given)
    if example is None:
        return given  # the command says it cannot open it
    print(f"rtaccel: no {given} here: the shipped example {example}", file=sys.stderr)
    return str(example)


def print_workload_error(err: Exception) -> None:
    messages = err.args[0] if err.args and isinstance(err.args[0], list) else [str(err)]
    for line in messages:
        print(line, file=sys.stderr)
    print(f"rtaccel: {len(messages)} error(s) in the workload", file=sys.stderr)


def check_workload(path: str, text: bytes | None = None) -> bool:
    """Loads the workload first so that its errors come as `file:line: what`;
    TEXT where it was read already (workload_read_once)."""
    try:
        if text is None:
            _core.load_workload(path)
        else:
            _core.load_workload_string(text, path)
    except _core.WorkloadError as err:
        print_workload_error(err)
        return False
    return True


def workload_read_once(path: str) -> tuple[bytes | None, bool]:
    """(the text of workload PATH where it can be read only once, a pipe:
    `rtaccel run <(gen_workload)`, `... | rtaccel run /dev/stdin`; None
    for a file) and whether it could be read. A command that reads its
    workload twice (to check it here, then in its runner) runs a copy of
    such a text."""
    try:
        return inputs.read_once(path), True
    except inputs.NotAFile as err:
        print(f"{path}: {err}", file=sys.stderr)
        return None, False


def keep_workload(prog: str, text: bytes, path: Path) -> str | None:
    """Writes TEXT, a workload read once, to PATH in a results folder for
    the runner to read (and the results to keep); PATH as a string, or None
    where it cannot, said in one line."""
    try:
        path.write_bytes(text)
    except OSError as err:
        print(f"{prog}: cannot write {path}: {err.strerror or err}", file=sys.stderr)
        return None
    return str(path)


def print_result(result, as_json: bool, formatter) -> int:
    """Prints a command's result as JSON or through its table formatter."""
    print(json.dumps(result, indent=1) if as_json else formatter(result))
    return EXIT_OK


def exec_program(cmd: list, env: dict | None = None) -> int:
    """Becomes the program (so that signals reach it: a best-effort co-runner
    is stopped with SIGTERM and reports its bandwidth), looked up in PATH,
    with ENV for its environment (this one's by default). It starts with
    SIGPIPE and SIGXFSZ at their default, as subprocess starts a program:
    Python ignores them for itself, and a program run under `rtaccel isolate
    run-be` would otherwise write on into a closed pipe. Raises OSError
    where it cannot start."""
    sys.stdout.flush()
    sys.stderr.flush()
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvpe(cmd[0], cmd, os.environ if env is None else env)
    except OSError:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_IGN)
        raise
    return EXIT_RUNTIME  # not reached


def end_by_signal(sig: int) -> None:
    """Ends this process by signal SIG, as the program it ran for the user
    ended: a shell then stops a loop on the Ctrl-C that ended the program.
    No core is dumped: the program's was, where it dumped one."""
    sys.stdout.flush()
    sys.stderr.flush()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sig != signal.SIGKILL:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    os.kill(os.getpid(), sig)


def _in_range(convert, bad, low, high, what: str):
    """An argparse type: TEXT as CONVERT makes it, within LOW..HIGH; BAD(TEXT)
    says what is wrong with text CONVERT refuses, WHAT (formatted with low
    and high) what is wrong with a value out of range."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(bad(text)) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(what.format(low=low, high=high))
        return value
    return parse


def number(low: float, high: float, what: str):
    """A number in LOW..HIGH ("the work fraction must be in [0.01, 1]")."""
    return _in_range(float, lambda text: f"expected a number, got {text!r}", low, high, what)


def whole_number(low: int, high: int, what: str, unit: str = ""):
    """A whole number in LOW..HIGH ("a kernel of {low}..{high} us")."""
    return _in_range(int, lambda text: f"not a whole number{unit}: {text!r}", low, high, what)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def counts(low: int, high: int, what: str):
    """An argparse type: whole numbers separated by commas, each within
    LOW..HIGH, as a list; WHAT names them in the messages."""
    def parse(text: str) -> list[int]:
        try:
            values = [int(v) for v in text.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what} separated by commas, got {text!r}") from None
        if any(v < low or v > high for v in values):
            raise argparse.ArgumentTypeError(f"{what} must be in {low}..{high}")
        return values
    return parse


def thread_counts(text: str) -> str:
    return ",".join(str(v) for v in counts(1, 8, "thread counts")(text))


mbps = whole_number(0, 2**32 - 2, "a threshold is 0..4294967294 MB/s", " of MB/s")


def gang_options(parser, what: str) -> None:
    """--gang and --no-gang, as analyze and run take them: WHAT is what they
    do ("analyze", "run")."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--gang", dest="gang", action="store_const", const=True, default=None,
                   help=f"{what} under one real-time gang at a time (default: the workload's "
                        "gang_scheduling)")
    g.add_argument("--no-gang", dest="gang", action="store_const", const=False,
                   help=f"{what} without gang scheduling, whatever the workload says")


def isolation_options(parser, what: str) -> None:
    """--isolation and --no-isolation, as analyze and run take them."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--isolation", dest="isolation", action="store_const", const=True, default=None,
                   help=f"{what} with memory-bandwidth regulation: the regulator, the best-effort "
                        "cgroup and the bandwidth lock of the workload's isolation section (default: "
                        "on when it has one)")
    g.add_argument("--no-isolation", dest="isolation", action="store_const", const=False,
                   help=f"{what} without it, whatever the workload says")


def make_results_folder(prog: str, path: str) -> bool:
    """Makes the results folder PATH with its parents, or says in one line
    why it cannot: before the work, not after it."""
    try:
        if Path(path).exists() and not Path(path).is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "a file, not a folder")
        Path(path).mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as err:
        print(f"{prog}: cannot write the results into {path}: {err.strerror or err}", file=sys.stderr)
        return False
    return True


def seconds(text: str, zero: bool = False) -> float:
    """A duration in (0, 86400] s, or with ZERO a time into a run in [0, 86400]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not (0 <= value if zero else 0 < value) or value > 86400:
        raise argparse.ArgumentTypeError(f"seconds must be in {'[' if zero else '('}0, 86400]")
    return value


def seconds_into_run(text: str) -> float:
    return seconds(text, zero=True)
