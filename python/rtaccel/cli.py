"""The rtaccel command line.

Exit status: 0 success; 1 the analysis found a critical chain not
schedulable; 2 bad input (workload file, arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rtaccel import _core
from rtaccel import analysis as rta
from rtaccel import accel, locks

EXIT_OK, EXIT_UNSCHEDULABLE, EXIT_BAD_INPUT = 0, 1, 2

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
DEMO_WORKLOADS = ("quickstart.yaml", "paam_case_study_1.yaml", "autoware_reference.yaml")


def _print_workload_error(err: Exception) -> None:
    messages = err.args[0] if err.args and isinstance(err.args[0], list) else [str(err)]
    for line in messages:
        print(line, file=sys.stderr)
    print(f"rtaccel: {len(messages)} error(s) in the workload", file=sys.stderr)


def cmd_analyze(args) -> int:
    options = {"horizon": args.horizon, "paper_blocking": args.paper_blocking}
    try:
        workload, results = rta.analyze_file(args.workload, args.horizon, args.paper_blocking,
                                             machine_cores=args.cores)
    except _core.WorkloadError as err:
        _print_workload_error(err)
        return EXIT_BAD_INPUT
    if args.json:
        print(rta.to_json(args.workload, workload, results, options))
    else:
        print(rta.format_table(args.workload, workload, results, options))
    return EXIT_OK if _core.all_critical_schedulable(results) else EXIT_UNSCHEDULABLE


def _utilizations(text: str) -> tuple:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}")
    if not values or any(v <= 0 or v > 64 for v in values):
        raise argparse.ArgumentTypeError("utilisations must be in (0, 64]")
    return values


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def cmd_experiment_schedulability(args) -> int:
    from rtaccel import schedulability as sched

    if args.max_period_ms < args.min_period_ms:
        print("rtaccel: --max-period-ms must not be below --min-period-ms", file=sys.stderr)
        return EXIT_BAD_INPUT
    settings = sched.Settings(
        sets=args.sets, seed=args.seed, utilizations=args.utilization, chains=args.chains,
        cores=args.cores, shared_executors=args.shared_executors, priority_levels=args.levels, preemption_cost_us=args.kappa_us,
        overhead_us=args.epsilon_us, min_period_ms=args.min_period_ms,
        max_period_ms=args.max_period_ms, jobs=args.jobs)
    print(f"# rtaccel experiment schedulability --vary {args.vary}: {settings.sets} sets per point, "
          f"seed {settings.seed}, utilisations {','.join(f'{u:g}' for u in settings.utilizations)}")

    def progress(point, done, total):
        print(f"# [{done:>3}/{total}] U={point.utilization:<4g} x={point.label:<5} "
              f"acceptance={point.ratio:.3f}", flush=True)

    points, seconds, paths = sched.experiment(args.vary, settings, args.out,
                                              None if args.quiet else progress)
    count = sum(p.sets for p in points)
    print(f"# {len(points)} points, {count} chainsets analysed in {seconds:.1f} s "
          f"({count / seconds:.0f} sets/s)")
    for path in paths:
        print(path)
    return EXIT_OK


def cmd_demo(args) -> int:
    # Until the executors land, the demo is the analysis of the shipped workloads.
    worst = EXIT_OK
    for name in DEMO_WORKLOADS:
        path = Path(args.examples) / name
        try:
            workload, results = rta.analyze_file(str(path))
        except _core.WorkloadError as err:
            _print_workload_error(err)
            return EXIT_BAD_INPUT
        print(rta.format_table(str(path), workload, results,
                               {"horizon": "period", "paper_blocking": False}))
        print()
        if not _core.all_critical_schedulable(results):
            worst = EXIT_UNSCHEDULABLE
    return worst


def cmd_shim(args) -> int:
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    modes = [m for m, on in (("trace", args.trace), ("pi", args.pi),
                             ("phase-fair", args.phase_fair), ("boost", args.boost)) if on]
    try:
        status = locks.run_under_shim(command, modes, args.out, args.ceiling)
    except locks.LockToolError as err:
        print(f"rtaccel shim: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.trace:
        print(f"# rtaccel shim: lock traces in {args.out}/ "
              f"(rtaccel lockstat {args.out}; open *.trace.json in ui.perfetto.dev)",
              file=sys.stderr)
    return status


def _print_result(result, as_json: bool, formatter) -> int:
    """Prints a command's result as JSON or through its table formatter."""
    print(json.dumps(result, indent=1) if as_json else formatter(result))
    return EXIT_OK


def cmd_lockstat(args) -> int:
    try:
        reports = locks.load_lockstat(args.files)
    except locks.LockToolError as err:
        print(f"rtaccel lockstat: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        for rep in reports:
            rep.pop("_file", None)
    return _print_result(reports, args.json, lambda r: locks.format_lockstat(r, args.top))


def cmd_lockdemo(args) -> int:
    try:
        results = locks.run_lockdemo(args.duration_ms, args.hog_ms, args.rounds)
    except locks.LockToolError as err:
        print(f"rtaccel lockdemo: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _print_result(results, args.json, locks.format_lockdemo)


def _bench(args, what: str, extra: list, formatter) -> int:
    try:
        result = accel.run_bench(what, extra, fifo=not args.no_fifo)
    except accel.AccelError as err:
        print(f"rtaccel bench: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _print_result(result, args.json, formatter)


def cmd_bench_request_overhead(args) -> int:
    extra = ["--wait", args.wait, "--requests", str(args.requests), "--kernel-us", str(args.kernel_us)]
    return _bench(args, "request-overhead", extra, accel.format_overhead)


def cmd_bench_preemption(args) -> int:
    return _bench(args, "preemption", ["--iterations", str(args.iterations)], accel.format_preemption)


def _kernel_us(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of microseconds: {text!r}") from None
    if not 0 <= value <= 1000000:
        raise argparse.ArgumentTypeError("a kernel of 0..1000000 us")
    return value


def _ceiling(text: str) -> int:
    value = _positive_int(text)
    if value > 99:
        raise argparse.ArgumentTypeError("a SCHED_FIFO priority is 1..99")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rtaccel",
        description="Predictable accelerator-heavy real-time software: analysis, server, executors.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("analyze", help="worst-case response time of every chain (PAAM Theorem 1)")
    p.add_argument("workload", help="workload YAML file")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--horizon", choices=("deadline", "period"), default="period",
                   help="where the fixed-point iteration gives up (default: period, so a miss "
                        "is reported with its size)")
    p.add_argument("--paper-blocking", action="store_true",
                   help="charge lower-priority blocking with CPU time only, as printed in the paper")
    p.add_argument("--cores", type=_positive_int, default=0,
                   help="cores of the target machine when the workload does not say "
                        "(default: this machine's)")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("experiment", help="schedulability experiments")
    esub = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    e = esub.add_parser("schedulability",
                        help="acceptance ratio of random chainsets (PAAM Fig. 14), CSV + PNG")
    e.add_argument("--vary", choices=("chains", "ratio"), required=True,
                   help="chains: chains per set at 1:1; ratio: accelerator:CPU from 1:9 to 7:3")
    e.add_argument("--sets", type=_positive_int, default=1000, help="chainsets per point (1000)")
    e.add_argument("--seed", type=int, default=1, help="random seed (1)")
    e.add_argument("--utilization", type=_utilizations, default=(0.6, 0.8, 1.0, 1.2),
                   help="total utilisations, one curve each (0.6,0.8,1.0,1.2)")
    e.add_argument("--chains", type=_positive_int, default=8,
                   help="chains per set when the ratio varies (8)")
    e.add_argument("--cores", type=_positive_int, default=4, help="executor cores (4)")
    e.add_argument("--shared-executors", action="store_true",
                   help="one executor per core running all its chains (non-preemptive blocking) "
                        "instead of one executor per chain")
    e.add_argument("--levels", type=_positive_int, default=4, help="accelerator priority levels (4)")
    e.add_argument("--kappa-us", type=float, default=50.0, help="preemption cost kappa (50 us)")
    e.add_argument("--epsilon-us", type=float, default=50.0, help="server overhead epsilon (50 us)")
    e.add_argument("--min-period-ms", type=float, default=10.0, help="shortest period (10 ms)")
    e.add_argument("--max-period-ms", type=float, default=1000.0, help="longest period (1000 ms)")
    e.add_argument("--jobs", type=int, default=0, help="threads (default: one per CPU)")
    e.add_argument("--out", default="out", help="output folder (out)")
    e.add_argument("--quiet", action="store_true", help="no progress lines")
    e.set_defaults(func=cmd_experiment_schedulability)

    p = sub.add_parser("shim", help="run a program with rtaccel's pthread interposer",
                       description="Runs CMD with librtaccel_shim.so preloaded. Exit status: "
                                   "CMD's (128+N if killed by signal N), 2 on bad arguments.")
    p.add_argument("--trace", action="store_true",
                   help="record per-lock statistics, lock patterns and a Perfetto timeline")
    p.add_argument("--pi", action="store_true", help="priority inheritance on every mutex")
    p.add_argument("--phase-fair", action="store_true",
                   help="replace every process-private rwlock with rtaccel's phase-fair lock")
    p.add_argument("--boost", action="store_true",
                   help="phase-fair rwlocks with priority boosting (implies --phase-fair)")
    p.add_argument("--ceiling", type=_ceiling, default=0,
                   help="SCHED_FIFO priority of boosted threads (default 98)")
    p.add_argument("--out", default="rtaccel-shim",
                   help="folder for the trace files (rtaccel-shim)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    p.set_defaults(func=cmd_shim)

    p = sub.add_parser("lockstat", help="summarise traces written by `rtaccel shim --trace`")
    p.add_argument("files", nargs="+", help="rtaccel-shim.PID.json files or folders of them")
    p.add_argument("--top", type=_positive_int, default=10, help="locks and functions shown (10)")
    p.add_argument("--json", action="store_true", help="print the merged reports as JSON")
    p.set_defaults(func=cmd_lockstat)

    p = sub.add_parser("lockdemo",
                       help="starvation and priority inversion, without and with the fixes")
    p.add_argument("--duration-ms", type=_positive_int, default=1000,
                   help="length of each starvation run (1000)")
    p.add_argument("--hog-ms", type=_positive_int, default=100,
                   help="how long the medium-priority hog preempts the lock holder (100)")
    p.add_argument("--rounds", type=_positive_int, default=3, help="inversion rounds (3)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_lockdemo)

    p = sub.add_parser("bench", help="measure rtaccel-server on this machine (cpu backend)")
    bsub = p.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")
    b = bsub.add_parser("request-overhead",
                        help="submit -> worker start -> kernel end -> client resumed, per request")
    b.add_argument("--wait", choices=("suspend", "spin"), default="suspend",
                   help="how the client waits for completion (suspend)")
    b.add_argument("--requests", type=_positive_int, default=20000, help="requests measured (20000)")
    b.add_argument("--kernel-us", type=_kernel_us, default=100, metavar="US",
                   help="length of each busy kernel, subtracted from the round trip (100)")
    b.add_argument("--no-fifo", action="store_true",
                   help="run server workers and client at SCHED_OTHER (no privilege needed)")
    b.add_argument("--json", action="store_true", help="print JSON (keys p50_us, p99_us, max_us)")
    b.set_defaults(func=cmd_bench_request_overhead)
    b = bsub.add_parser("preemption",
                        help="delay of a high-bucket request preempting a low-bucket kernel "
                             "(PAAM Table I)")
    b.add_argument("--iterations", type=_positive_int, default=200, help="pairs per kernel (200)")
    b.add_argument("--no-fifo", action="store_true",
                   help="SCHED_OTHER workers: shows what is lost without real preemption")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench_preemption)

    p = sub.add_parser("demo", help="the main job: analysis of the shipped example workloads")
    p.add_argument("--examples", default=str(EXAMPLES_DIR), help="folder of the example workloads")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
