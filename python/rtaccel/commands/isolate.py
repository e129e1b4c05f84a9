"""The rtaccel commands of memory-bandwidth regulation (isolate) and of the
memory benchmarks of best-effort co-runners (membench)."""

from __future__ import annotations

import argparse

from rtaccel import accel
from rtaccel.commands import common


COMMANDS = ("regulate", "status", "run-be", "hold")


def cmd_isolate(argv: list) -> int:
    """rtaccel isolate COMMAND ...: rtaccel-isolate with the arguments as
    given. `rtaccel` hands them over unparsed, as it does `rtaccel server`'s:
    argparse drops a "--" right after COMMAND, where `run-be -- CMD` has it."""
    return common.exec_program([str(accel.binary("rtaccel-isolate")), *argv])


def cmd_membench(args) -> int:
    cmd = [str(accel.binary("rtaccel-membench")), args.benchmark]
    if args.size:
        cmd += ["--size", args.size]
    if args.duration:
        cmd += ["--duration", str(args.duration)]
    if args.json:
        cmd.append("--json")
    return common.exec_program(cmd)


def register(sub) -> None:
    """Adds the family's commands to the parser's SUB."""
    p = sub.add_parser("isolate", help="memory-bandwidth regulation: regulate, status, run-be, hold",
                       description="Runs rtaccel-isolate: `regulate` (the regulator daemon), `status` "
                                   "(live, per core), `run-be -- CMD` (CMD as best-effort work), "
                                   "`hold --threshold MBPS -- CMD` (CMD under the bandwidth lock). "
                                   "`rtaccel isolate COMMAND --help` lists each one's options.")
    p.add_argument("command", choices=COMMANDS)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda args: cmd_isolate([args.command, *args.args]))

    p = sub.add_parser("membench", help="memory benchmarks for best-effort co-runners (IsolBench-like)")
    p.add_argument("benchmark", choices=("read", "write", "cache"),
                   help="read or write sequentially over --size, or read a set that stays in L1")
    p.add_argument("--size", help="working set, e.g. 8M (default 8M; cache: 16K)")
    p.add_argument("--duration", type=common.seconds, help="seconds (default: until SIGTERM or Ctrl-C)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_membench)
