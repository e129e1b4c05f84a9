"""The rtaccel commands of real runs of a workload (run, demo), of their
comparison (compare, report) and of the machine's overheads (calibrate)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rtaccel import _core, accel, realtime, runner, timeline
from rtaccel.commands import common
from rtaccel.errors import EXIT_BAD_INPUT, EXIT_CANNOT_RUN_HERE, EXIT_FAILS, EXIT_OK, EXIT_RUNTIME


EXAMPLES_DIR = common.EXAMPLES_DIR
DEMO_WORKLOAD = "autoware_reference.yaml"
ISOLATION_WORKLOAD = "autoware_memory.yaml"  # demo --isolation
# A workload given through a pipe, as the run's results keep it.
WORKLOAD_COPY = "workload.yaml"


def _exec_value(name: str):
    """argparse's type for rtaccel-exec's --NAME: the text, where
    rtaccel-exec takes it (its own table's parser says)."""
    def check(text: str) -> str:
        # as the bytes rtaccel-exec gets: a name in another encoding too
        if why := _core.check_run_option(name, os.fsencode(text)):
            raise argparse.ArgumentTypeError(f"{why}, not {text!r}")
        return text
    return check


def exec_dests() -> list[str]:
    """The `rtaccel run` arguments that are rtaccel-exec's options, by dest:
    what cmd_run hands on as they were given."""
    return [spec["name"].replace("-", "_") for spec in runner.exec_options()
            if spec["for_users"] and not _negation(spec)]


def _negation(spec: dict) -> bool:
    """--no-X where the table has --X: the other half of X's pair."""
    names = {s["name"] for s in runner.exec_options()}
    return spec["value"] is None and spec["name"].startswith("no-") and spec["name"][3:] in names


def add_exec_options(p) -> None:
    """rtaccel-exec's options that a user gives, from its one table
    (src/exec/run_options.h): a flag and its --no- form as one of
    True/False/None, a value checked by rtaccel-exec's own parser, a
    repeated option as a list."""
    table = {spec["name"]: spec for spec in runner.exec_options()}
    for spec in table.values():
        if not spec["for_users"] or _negation(spec):
            continue
        name, dest, text = spec["name"], spec["name"].replace("-", "_"), " ".join(spec["help"].split("\n"))
        no = table.get(f"no-{name}")
        if spec["value"] is None and no:
            g = p.add_mutually_exclusive_group()
            g.add_argument(f"--{name}", dest=dest, action="store_const", const=True, default=None, help=text)
            g.add_argument(f"--no-{name}", dest=dest, action="store_const", const=False,
                           help=" ".join(no["help"].split("\n")))
        elif spec["value"] is None:
            p.add_argument(f"--{name}", dest=dest, action="store_true", help=text)
        elif spec["repeated"]:
            p.add_argument(f"--{name}", dest=dest, action="append", default=[], metavar=spec["value"],
                           type=_exec_value(name), help=text)
        else:
            p.add_argument(f"--{name}", dest=dest, default=spec["default"], metavar=spec["value"],
                           type=_exec_value(name), nargs="?" if spec["alone"] else None,
                           const=spec["alone"], help=text)


def cmd_run(args) -> int:
    text, readable = common.workload_read_once(args.workload)
    if not readable or not common.check_workload(args.workload, text):
        return EXIT_BAD_INPUT
    if not common.make_results_folder("rtaccel run", args.out):
        return EXIT_BAD_INPUT
    workload = args.workload
    if text is not None:
        # The runner reads the workload from a file, which the results keep.
        workload = common.keep_workload("rtaccel run", text, Path(args.out) / WORKLOAD_COPY)
        if workload is None:
            return EXIT_RUNTIME
    try:
        given = {dest: getattr(args, dest) for dest in exec_dests() if dest not in ("policy", "duration", "out")}
        status = runner.run(workload, args.policy, args.duration, args.out,
                            calibration=not args.no_calibration, **given)
    except (runner.RunError, accel.AccelError) as err:
        return common.fail("rtaccel", err)
    # 3 with a summary: a process of the run died, and the results up to
    # then were written (the folder's earlier results go as a run starts).
    if status in (0, 3, 130) and (Path(args.out) / "summary.json").exists():
        summary = runner.load_summary(args.out)
        print(runner.format_compare([summary]))
        written = [f"{args.out}/{name}{note}" for name, note in (("summary.json", ""), ("trace.json",
                   " (open in ui.perfetto.dev)"), ("latency.csv", "")) if (Path(args.out) / name).exists()]
        if text is not None:
            written.append(f"{workload} (the workload read from {args.workload})")
        print(f"# results: {', '.join(written)}")
        if hint := large_trace_hint(args.out):
            print(hint)
        if args.shim:
            print(f"# the interposer's reports: {args.out}/shim/ (rtaccel lockstat {args.out}/shim)")
        # 1: the property the run checks does not hold, as compare says of
        # the same results. Only for a run that ended as asked: an
        # interrupted or failed one keeps its own status.
        if status == EXIT_OK and runner.bounds_exceeded([summary]):
            return EXIT_FAILS
    return status


def cmd_compare(args) -> int:
    try:
        summaries = [runner.load_summary(f) for f in args.folders]
    except runner.RunError as err:
        return common.fail("rtaccel", err)
    if args.json:
        print(json.dumps({"runs": [{"folder": s["folder"], "policy": s["policy"]} for s in summaries],
                          "paam_max_vs": runner.critical_ratios(summaries)}, indent=2))
    else:
        print(runner.format_compare(summaries))
    # 1: the property the runs check does not hold, as for analyze.
    return EXIT_FAILS if runner.bounds_exceeded(summaries) else EXIT_OK


def cmd_report(args) -> int:
    try:
        table, pngs = runner.report(args.folders, args.out)
        exceeded = runner.bounds_exceeded([runner.load_summary(f) for f in args.folders])
    except runner.RunError as err:
        return common.fail("rtaccel", err)
    print(table)
    print(f"# {len(pngs)} CDF plots: {Path(pngs[0]).parent}/cdf_*.png" if pngs else "# no chains")
    # As `rtaccel compare` of the same folders: paam's bound exceeded is 1.
    return EXIT_FAILS if exceeded else EXIT_OK


def cmd_calibrate(args) -> int:
    # The overheads the bounds take are those of real-time threads; measured
    # at normal priority they would be another machine's.
    verdict = realtime.diagnose()
    if not verdict.allowed:
        print(f"rtaccel calibrate: cannot measure real-time threads' overheads here: {verdict.reason}",
              file=sys.stderr)
        return EXIT_CANNOT_RUN_HERE
    try:
        doc = runner.calibrate(requests=args.requests, iterations=args.iterations)
    except accel.AccelError as err:
        return common.fail("rtaccel", err)
    print(f"# this machine: epsilon (server overhead per request, p99) {doc['epsilon_us']:.1f} us, "
          f"kappa (preemption cost, p99) {doc['kappa_us']:.1f} us, release jitter (timer "
          f"wake-up, p99) {doc['release_jitter_us']:.1f} us, the kernel's work for a link "
          f"(softirqs) {doc['link_kernel_ns_per_kb']} ns per KiB")
    print(f"# written to {doc['path']}: `rtaccel analyze` and `rtaccel run` now use at least these")
    return EXIT_OK


def cmd_demo(args) -> int:
    name = ISOLATION_WORKLOAD if args.isolation else DEMO_WORKLOAD
    workload = str(Path(args.examples) / name)
    if not common.check_workload(workload):
        return EXIT_BAD_INPUT
    # Said before the three runs without isolation, not after them.
    if args.isolation and not (verdict := realtime.diagnose()).allowed:
        print(f"rtaccel demo: --isolation: the regulator needs SCHED_FIFO and perf events (root): "
              f"{verdict.reason}; `rtaccel demo` without it runs here", file=sys.stderr)
        return EXIT_RUNTIME
    if not common.make_results_folder("rtaccel demo", args.out):
        return EXIT_BAD_INPUT
    # Under isolation, beside memory hogs: one that writes and one that
    # reads 64 MiB, twice the shared cache, on any core.
    membench = str(accel.binary("rtaccel-membench"))
    corunners = [f"{membench} write --size 64M --json", f"{membench} read --size 64M --json"] \
        if args.isolation else []
    # A machine never calibrated is measured for the demo, not left to the
    # workload's overheads: a bound below what this machine's timers and
    # server take is broken by the machine alone, in a user's first run.
    calibration: bool | dict = True
    if runner.load_calibration() is None and realtime.diagnose().allowed:
        print(f"# rtaccel demo: this machine has no calibration at {runner.calibration_path()}: its overheads "
              "are measured for the demo first (`rtaccel calibrate` keeps them)")
        try:
            calibration = runner.measure_calibration()
        except accel.AccelError as err:
            return common.fail("rtaccel", err)
        print(f"# this machine: epsilon {calibration['epsilon_us']:.1f} us, kappa {calibration['kappa_us']:.1f} us, "
              f"release jitter {calibration['release_jitter_us']:.1f} us, the kernel's work for a link "
              f"{calibration['link_kernel_ns_per_kb']} ns per KiB")
    print(f"# rtaccel demo: {name} under ros2, picas and paam"
          + (", and paam with isolation, each beside two memory hogs" if args.isolation else "")
          + f", {args.duration:g} s each")
    try:
        status, folders = runner.demo(workload, args.duration, args.out, progress=not args.quiet,
                                      best_effort=corunners, isolation=args.isolation, calibration=calibration)
        if status == EXIT_FAILS:
            # The server's admission control refused a chain (said above):
            # with this machine's overheads, as measured or calibrated on a
            # host that ran slow then, the demo's workload has a chain
            # without a bound. A first run still shows the mechanisms.
            print("# rtaccel demo: with this machine's overheads the server's admission control finds no bound for "
                  "a chain (above); the demo runs with the workload's own overheads instead, which this machine "
                  "can break (`rtaccel calibrate` measures them again)")
            status, folders = runner.demo(workload, args.duration, args.out, progress=not args.quiet,
                                          best_effort=corunners, isolation=args.isolation, calibration=False)
        if status != 0:
            return status
        table, pngs = runner.report(folders)
        exceeded = runner.bounds_exceeded([runner.load_summary(f) for f in folders])
    except (runner.RunError, accel.AccelError) as err:
        return common.fail("rtaccel", err)
    print(table)
    print(f"# report: {Path(pngs[0]).parent}/ (compare.txt, cdf_*.png); traces: "
          f"{args.out}/<policy>/trace.json (open in ui.perfetto.dev)")
    # As `rtaccel compare` of the same folders: paam's bound exceeded is 1.
    return EXIT_FAILS if exceeded else EXIT_OK


# The Perfetto UI in a browser holds about 2 GB at runtime, a few times a
# trace's size: above this, a run says how to cut its trace.
BROWSER_TRACE_MB = 256


def large_trace_hint(out: str) -> str | None:
    """What to do with a run's trace.json too large for a browser; None
    where it is not."""
    trace = Path(out) / "trace.json"
    mb = trace.stat().st_size / 2**20 if trace.exists() else 0
    if mb <= BROWSER_TRACE_MB:
        return None
    return (f"# trace.json is {mb:.0f} MB, more than a browser opens whole: "
            f"`rtaccel cut {out} --from S --to S` (or --over-bound) writes a part of it")


def cmd_cut(args) -> int:
    folder = Path(args.run)
    source = folder / "trace.json" if folder.is_dir() else folder
    if not source.exists():
        print(f"rtaccel cut: no {source}: give a result folder of `rtaccel run` or its trace.json",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.over_bound is None and args.start is None and args.end is None:
        print("rtaccel cut: say which part: --from S, --to S, or --over-bound", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.over_bound is not None and (args.start is not None or args.end is not None):
        print("rtaccel cut: --over-bound chooses its own times: no --from or --to with it", file=sys.stderr)
        return EXIT_BAD_INPUT
    start, end = args.start or 0.0, args.end if args.end is not None else float("inf")
    if end <= start:
        print(f"rtaccel cut: --to ({end:g} s) must come after --from ({start:g} s)", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        if args.over_bound is not None:
            windows = timeline.over_bound(source, args.over_bound * 1000.0)
            if not windows:
                print(f"# no chain instance over its bound in {source}: no part to cut")
                return EXIT_OK
            out = args.output or source.with_name("trace-over-bound.json")
            what = f"{len(windows)} windows around the instances over their bounds (±{args.over_bound:g} ms)"
        else:
            windows = [(start * 1e6, end * 1e6)]
            finite = end != float("inf")
            out = args.output or source.with_name(f"trace-{start:g}-{end:g}s.json" if finite
                                                  else f"trace-from-{start:g}s.json")
            what = f"{start:g} s to {end:g} s" if finite else f"{start:g} s to the end"
        if Path(out).resolve() == source.resolve():
            print(f"rtaccel cut: {out} is the trace being cut: give another -o", file=sys.stderr)
            return EXIT_BAD_INPUT
        count = timeline.write(Path(out), timeline.cut(timeline.events(source), windows))
    except timeline.Error as err:
        return common.fail("rtaccel cut", err)
    print(f"# {count} events of {what}: {out} (open in ui.perfetto.dev)")
    return EXIT_OK



def register(sub) -> None:
    """Adds the family's commands to the parser's SUB."""
    p = sub.add_parser("run", help="run a workload for real and measure its chains")
    p.add_argument("workload", type=common.workload_file,
                   help=f"workload YAML file (or a pipe: <(cmd), /dev/stdin; the run keeps it as "
                        f"OUT/{WORKLOAD_COPY}; or a shipped example's name: `rtaccel examples`)")
    p.add_argument("--no-calibration", action="store_true",
                   help="ignore this machine's `rtaccel calibrate` overheads")
    add_exec_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compare", help="side-by-side table of `rtaccel run` results")
    p.add_argument("folders", nargs="+", help="result folders")
    p.add_argument("--json", action="store_true", help="print the paam ratios as JSON")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("report", help="comparison table and CDF plots with the analysis bound")
    p.add_argument("folders", nargs="+", help="result folders")
    p.add_argument("--out", help="folder for the plots (default: report/ beside the first folder)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("cut", help="a part of a run's trace.json, small enough to open in a browser")
    p.add_argument("run", help="a result folder of `rtaccel run` (or its trace.json)")
    p.add_argument("--from", dest="start", type=common.seconds_into_run, metavar="S", help="seconds into the run (0)")
    p.add_argument("--to", dest="end", type=common.seconds_into_run, metavar="S", help="seconds into the run (its end)")
    p.add_argument("--over-bound", nargs="?", const=50.0, default=None, metavar="MS",
                   type=common.number(0, 60000, "the margin must be in [0, 60000] ms"),
                   help="instead: the chain instances the monitor found over their bounds, each "
                        "with MS before and after it (50)")
    p.add_argument("-o", "--output", help="the part's file (default: beside the trace, "
                                          "trace-FROM-TOs.json or trace-over-bound.json)")
    p.set_defaults(func=cmd_cut)

    p = sub.add_parser("calibrate",
                       help="measure this machine's server overhead and preemption cost")
    p.add_argument("--requests", type=common.positive_int, default=5000, help="requests timed (5000)")
    p.add_argument("--iterations", type=common.positive_int, default=100,
                   help="preemptions per kernel (100)")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("demo", help="the main job: the Autoware reference system under "
                                    "ros2, picas and paam, compared")
    p.add_argument("--duration", type=common.seconds, default=40.0, help="seconds per policy (40)")
    p.add_argument("--out", default="out/demo", help="result folder (out/demo)")
    p.add_argument("--examples", default=str(EXAMPLES_DIR), help="folder of the example workloads")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--isolation", action="store_true",
                   help="the Autoware system with memory-bound stages beside two memory hogs: "
                        "ros2, picas and paam without isolation, then paam with the regulator and "
                        "the bandwidth lock (needs root)")
    p.set_defaults(func=cmd_demo)
