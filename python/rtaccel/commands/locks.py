"""The rtaccel commands of the interposer (shim), of its traces (lockstat)
and of the lock demonstration (lockdemo)."""

from __future__ import annotations

import argparse
import os
import sys

from rtaccel import locks
from rtaccel.commands import common


def cmd_shim(args) -> int:
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    modes = [m for m, on in (("trace", args.trace), ("pi", args.pi),
                             ("phase-fair", args.phase_fair), ("boost", args.boost)) if on]
    try:
        if not command:
            raise locks.LockToolError("no command given (rtaccel shim [OPTIONS] -- CMD ...)", bad_input=True)
        # Said first: the program runs, but as it would without the shim.
        if why := locks.why_not_preloaded(command, os.environ):
            print(f"rtaccel shim: {command[0]} {why}; it runs as it would without rtaccel shim",
                  file=sys.stderr)
        if not args.trace:
            # Nothing is left to do once the program ends: this process
            # becomes it, and its pid, descriptors and signals are the
            # caller's own.
            env = locks.shim_environment(modes, None, args.ceiling, bwlock=args.bwlock,
                                         bwlock_threshold=args.bwlock_threshold)
            try:
                return common.exec_program(command, env)
            except OSError as err:
                return locks.cannot_start(command, err)
        folder = locks.new_run_folder(command, args.out)
        status = locks.run_under_shim(command, modes, folder, args.ceiling,
                                      bwlock=args.bwlock, bwlock_threshold=args.bwlock_threshold)
    except locks.LockToolError as err:
        return common.fail("rtaccel shim", err)
    traced = len(locks.traces_in(folder))
    print(f"# rtaccel shim: {traced} process{'es' if traced != 1 else ''} traced, in {folder}/ "
          + (f"(rtaccel lockstat {folder}; open its *.trace.json in ui.perfetto.dev)" if traced else
             "(a process that ends by a signal or by _exit writes no report; docs/locks.md)"),
          file=sys.stderr)
    if status < 0:
        common.end_by_signal(-status)
        return 128 - status
    return status


def cmd_lockstat(args) -> int:
    try:
        reports = locks.load_lockstat(args.files)
    except locks.LockToolError as err:
        return common.fail("rtaccel lockstat", err)
    if args.json:
        for rep in reports:
            rep.pop("_file", None)
    return common.print_result(reports, args.json, lambda r: locks.format_lockstat(r, args.top))


def cmd_lockdemo(args) -> int:
    try:
        results = locks.run_lockdemo(args.duration_ms, args.hog_ms, args.rounds)
    except locks.LockToolError as err:
        return common.fail("rtaccel lockdemo", err)
    return common.print_result(results, args.json, locks.format_lockdemo)


def _ceiling(text: str) -> int:
    value = common.positive_int(text)
    if value > 99:
        raise argparse.ArgumentTypeError("a SCHED_FIFO priority is 1..99")
    return value


def register(sub) -> None:
    """Adds the family's commands to the parser's SUB."""
    p = sub.add_parser("shim", help="run a program with rtaccel's pthread interposer",
                       description="Runs CMD with librtaccel_shim.so preloaded. Exit status: "
                                   "CMD's (it ends by the signal that ended CMD), 127 where CMD is not "
                                   "found, 2 on bad arguments. Signals sent to this command go on "
                                   "to CMD.")
    p.add_argument("--trace", action="store_true",
                   help="record per-lock statistics, lock patterns and a Perfetto timeline")
    p.add_argument("--pi", action="store_true", help="priority inheritance on every mutex")
    p.add_argument("--phase-fair", action="store_true",
                   help="replace every process-private rwlock with rtaccel's phase-fair lock")
    p.add_argument("--boost", action="store_true",
                   help="phase-fair rwlocks with priority boosting (implies --phase-fair)")
    p.add_argument("--ceiling", type=_ceiling, default=0,
                   help="SCHED_FIFO priority of boosted threads (default 98)")
    p.add_argument("--out", default=None,
                   help="with --trace: the run's folder, new or empty (default: a new folder "
                        "per run under rtaccel-shim/, named after the time and the program)")
    p.add_argument("--bwlock", nargs="?", const="default", default=None, metavar="NAME",
                   help="hold bandwidth lock NAME (default: default) during the program's GPU "
                        "segments, so that `rtaccel isolate regulate` throttles best-effort "
                        "cores meanwhile (BWLOCK++)")
    p.add_argument("--bwlock-threshold", type=common.mbps, default=0, metavar="MBPS",
                   help="best-effort bandwidth per core the GPU segments allow (default 0)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    p.set_defaults(func=cmd_shim)

    p = sub.add_parser("lockstat", help="summarise traces written by `rtaccel shim --trace`")
    p.add_argument("files", nargs="+",
                   help="a run's folder (or rtaccel-shim/: its newest run) or rtaccel-shim.PID.json "
                        "files")
    p.add_argument("--top", type=common.positive_int, default=10, help="locks and functions shown (10)")
    p.add_argument("--json", action="store_true", help="print the merged reports as JSON")
    p.set_defaults(func=cmd_lockstat)

    p = sub.add_parser("lockdemo",
                       help="starvation and priority inversion, without and with the fixes")
    p.add_argument("--duration-ms", type=common.positive_int, default=1000,
                   help="length of each starvation run (1000)")
    p.add_argument("--hog-ms", type=common.positive_int, default=100,
                   help="how long the medium-priority hog preempts the lock holder (100)")
    p.add_argument("--rounds", type=common.positive_int, default=3, help="inversion rounds (3)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_lockdemo)
