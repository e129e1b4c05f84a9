"""The rtaccel commands of the analysis (analyze) and of the schedulability
experiments (experiment)."""

from __future__ import annotations

import argparse
import sys

from rtaccel import _core
from rtaccel import analysis as rta
from rtaccel import runner
from rtaccel.commands import common
from rtaccel.errors import EXIT_BAD_INPUT, EXIT_FAILS, EXIT_OK


def cmd_analyze(args) -> int:
    try:
        calibration = None if args.no_calibration else runner.load_calibration()
    except runner.RunError as err:
        return common.fail("rtaccel", err)
    options = {"horizon": args.horizon, "paper_blocking": args.paper_blocking,
               "calibration": calibration,
               "uncalibrated": None if calibration or args.no_calibration else str(runner.calibration_path())}
    try:
        workload, results = rta.analyze_file(args.workload, args.horizon, args.paper_blocking,
                                             machine_cores=args.cores, calibration=calibration,
                                             gang=args.gang, isolation=args.isolation)
    except _core.WorkloadError as err:
        common.print_workload_error(err)
        return EXIT_BAD_INPUT
    options["gang"] = rta.workload_gang_scheduled(workload, args.gang)
    options["isolation"] = workload.isolation is not None
    if args.json:
        print(rta.to_json(args.workload, workload, results, options))
    else:
        print(rta.format_table(args.workload, workload, results, options))
    return EXIT_OK if _core.all_critical_schedulable(results) else EXIT_FAILS


def _utilizations(text: str) -> tuple:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}")
    if not values or not all(0 < v <= 64 for v in values):  # NaN too
        raise argparse.ArgumentTypeError("utilisations must be in (0, 64]")
    return values


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
    if not common.make_results_folder("rtaccel", args.out):
        return EXIT_BAD_INPUT
    print(f"# rtaccel experiment schedulability --vary {args.vary}: {settings.sets} sets per point, "
          f"seed {settings.seed}, utilisations {','.join(f'{u:g}' for u in settings.utilizations)}")

    def progress(point, done, total):
        print(f"# [{done:>3}/{total}] U={point.utilization:<4g} x={point.label:<5} "
              f"acceptance={point.ratio:.3f}", flush=True)

    try:
        points, seconds, paths = sched.experiment(args.vary, settings, args.out,
                                                  None if args.quiet else progress)
    except OSError as err:
        print(f"rtaccel: cannot write the results into {args.out}: {err.strerror or err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    count = sum(p.sets for p in points)
    print(f"# {len(points)} points, {count} chainsets analyzed in {seconds:.1f} s "
          f"({count / seconds:.0f} sets/s)")
    for path in paths:
        print(path)
    return EXIT_OK


def register(sub) -> None:
    """Adds the family's commands to the parser's SUB."""
    p = sub.add_parser("analyze", help="worst-case response time of every chain (PAAM Theorem 1)")
    p.add_argument("workload", type=common.workload_file,
                   help="workload YAML file (or a shipped example's name: `rtaccel examples`)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--horizon", choices=("deadline", "period"), default="period",
                   help="where the fixed-point iteration gives up (default: period, so a miss "
                        "is reported with its size)")
    p.add_argument("--paper-blocking", action="store_true",
                   help="the paper's analysis as printed: lower-priority blocking with CPU time "
                        "only, and none of rtaccel's refinements (docs/analysis.md)")
    p.add_argument("--no-calibration", action="store_true",
                   help="ignore this machine's `rtaccel calibrate` overheads")
    common.gang_options(p, "analyze")
    common.isolation_options(p, "analyze")
    p.add_argument("--cores", type=common.positive_int, default=0,
                   help="cores of the target machine when the workload does not say "
                        "(default: this machine's)")
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("experiment", help="schedulability experiments")
    esub = p.add_subparsers(dest="experiment", required=True, metavar="EXPERIMENT")
    e = esub.add_parser("schedulability",
                        help="acceptance ratio of random chainsets (PAAM Fig. 14), CSV + PNG")
    e.add_argument("--vary", choices=("chains", "ratio"), required=True,
                   help="chains: chains per set at 1:1; ratio: accelerator:CPU from 1:9 to 7:3")
    e.add_argument("--sets", type=common.positive_int, default=1000, help="chainsets per point (1000)")
    e.add_argument("--seed", type=int, default=1, help="random seed (1)")
    e.add_argument("--utilization", type=_utilizations, default=(0.6, 0.8, 1.0, 1.2),
                   help="total utilisations, one curve each (0.6,0.8,1.0,1.2)")
    e.add_argument("--chains", type=common.positive_int, default=8,
                   help="chains per set when the ratio varies (8)")
    e.add_argument("--cores", type=common.positive_int, default=4, help="executor cores (4)")
    e.add_argument("--shared-executors", action="store_true",
                   help="one executor per core running all its chains (non-preemptive blocking) "
                        "instead of one executor per chain")
    e.add_argument("--levels", type=common.positive_int, default=4, help="accelerator priority levels (4)")
    overhead = common.number(0, 1e6, "an overhead must be in [{low}, {high:.0f}] us")
    period = common.number(0.001, 3.6e6, "a period must be in [{low}, {high:.0f}] ms")
    e.add_argument("--kappa-us", type=overhead, default=50.0, help="preemption cost kappa (50 us)")
    e.add_argument("--epsilon-us", type=overhead, default=50.0, help="server overhead epsilon (50 us)")
    e.add_argument("--min-period-ms", type=period, default=10.0, help="shortest period (10 ms)")
    e.add_argument("--max-period-ms", type=period, default=1000.0, help="longest period (1000 ms)")
    e.add_argument("--jobs", type=common.whole_number(0, 4096, "threads must be in {low}..{high} (0: one per CPU)"),
                   default=0, help="threads (default: one per CPU)")
    e.add_argument("--out", default="out", help="output folder (out)")
    e.add_argument("--quiet", action="store_true", help="no progress lines")
    e.set_defaults(func=cmd_experiment_schedulability)
