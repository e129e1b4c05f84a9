"""The rtaccel command line: one module per command family in
rtaccel/commands/ (its parser, its command, its output); this one puts
them together. Exit status: see rtaccel/errors.py.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading

import rtaccel
from rtaccel import realtime
from rtaccel.commands import analyze, bench, examples, isolate, locks, run, server
from rtaccel.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_RUNTIME

# In the order `rtaccel --help` lists them.
FAMILIES = (server, examples, analyze, locks, bench, isolate, run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rtaccel",
        description="Predictable accelerator-heavy real-time software: analysis, server, executors.")
    parser.add_argument("--version", action="version", version=f"rtaccel {rtaccel.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for family in FAMILIES:
        family.register(sub)
    return parser


# Commands that start real-time work: before them, real-time priorities are
# made available where root can, or their absence is said once.
REALTIME_COMMANDS = {"server", "run", "demo", "bench", "lockdemo", "isolate", "calibrate", "shim"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in REALTIME_COMMANDS and not {"-h", "--help"} & set(argv):
        realtime.ensure()
    if argv and argv[0] == "server":
        return server.cmd_server(argv[1:])
    if argv[:1] == ["isolate"] and argv[1:2] and argv[1] in isolate.COMMANDS:
        return isolate.cmd_isolate(argv[1:])
    args = build_parser().parse_args(argv)
    # SIGTERM (kill, timeout) and a hang-up (the terminal or ssh session
    # gone) end a command as Ctrl-C does, so that what it started stops and
    # what it made goes (a benchmark's private server and its folder in
    # /tmp). Where they are ignored (nohup), they stay so.
    stops = [sig for sig in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(sig) != signal.SIG_IGN]
    previous = ({sig: signal.signal(sig, _interrupt) for sig in stops}
                if threading.current_thread() is threading.main_thread() else {})
    try:
        status = args.func(args)
        # What is buffered is written here, where a failure to write it is
        # handled below, not at exit (a traceback and status 120).
        if sys.stdout is not None:
            sys.stdout.flush()
        return status
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _no_reader()
        return EXIT_OK
    except OSError as e:
        # A terminal that hung up (the ssh session of a long run gone)
        # fails every write with EIO: what was left to say has no reader,
        # and a run's results are on disk already.
        if e.errno == errno.EIO:
            _no_reader()
            return EXIT_INTERRUPTED
        # A full disk under `rtaccel analyze ... > report.txt`: one line,
        # and the exit status of a failure to run, not a traceback and 1,
        # which says a chain misses its deadline.
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            _to_null(sys.stdout)
            try:
                print(f"rtaccel: cannot write {e.filename or 'its output'}: {e.strerror}", file=sys.stderr)
            except OSError:
                _to_null(sys.stderr)
            return EXIT_RUNTIME
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def _no_reader() -> None:
    """Where stdout's reader is gone: what is still buffered for it goes
    to /dev/null, not into a second error at exit (which Python makes exit
    status 120)."""
    _to_null(sys.stdout, sys.stderr)


def _to_null(*streams) -> None:
    """What is still buffered for STREAMS goes to /dev/null from here on."""
    null = os.open(os.devnull, os.O_WRONLY)
    for stream in streams:
        if stream is not None:  # None: its descriptor was closed when Python started
            os.dup2(null, stream.fileno())
    os.close(null)


if __name__ == "__main__":
    sys.exit(main())
