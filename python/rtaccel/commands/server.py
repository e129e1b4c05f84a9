"""The rtaccel commands of the accelerator server daemon (server) and of
real-time priorities (realtime)."""

from __future__ import annotations

import argparse
import json

from rtaccel import accel, realtime
from rtaccel.commands import common
from rtaccel.errors import EXIT_FAILS, EXIT_OK


def cmd_server(server_args: list) -> int:
    """Replaces this process with the daemon, so that signals, the exit status
    and --ready-fd reach it unchanged. Its arguments are its own: argparse
    never sees them."""
    try:
        binary = str(accel.binary("rtaccel-server"))
    except accel.AccelError as err:
        return common.fail("rtaccel", err)
    return common.exec_program([binary, *server_args])


def cmd_realtime(args) -> int:
    before = realtime.diagnose()
    after = before if before.allowed else realtime.ensure(quiet=args.json,
                                                          also=(args.pid,) if args.pid else ())
    if args.json:
        print(json.dumps({"allowed": after.allowed, "granted": after.allowed and not before.allowed,
                          "reason": before.reason}))
    elif after.allowed:
        print("real-time priorities: allowed" + ("" if before.allowed else " (granted: see above)"))
    return EXIT_OK if after.allowed else EXIT_FAILS


def register(sub) -> None:
    """Adds the family's commands to the parser's SUB."""
    p = sub.add_parser("server", add_help=False,
                       help="run rtaccel-server, the accelerator server daemon (its options follow; "
                            "rtaccel server --help lists them)")
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda args: cmd_server(args.args))

    p = sub.add_parser("realtime", help="whether real-time priorities are allowed here, why not, "
                                         "and the remedy root can apply")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument("--pid", type=common.positive_int, default=None,
                   help="where root can grant real-time priorities, grant them to process PID too "
                        "(a shell: `rtaccel realtime --pid $$`), and so to what it starts")
    p.set_defaults(func=cmd_realtime)
