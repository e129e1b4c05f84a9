"""The rtaccel command line.

Exit status: 0 success; 1 the analysis found a critical chain not
schedulable; 2 bad input (workload file, arguments).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import rtaccel

from rtaccel import _core
from rtaccel import analysis as rta
from rtaccel import accel, locks, realtime, runner

EXIT_OK, EXIT_UNSCHEDULABLE, EXIT_BAD_INPUT = 0, 1, 2


def _examples_dir() -> Path:
    """The example workloads: inside an installed package, else in the checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "examples", here.parents[1] / "examples"):
        if candidate.is_dir():
            return candidate
    return here / "examples"


EXAMPLES_DIR = _examples_dir()
DEMO_WORKLOAD = "autoware_reference.yaml"


def _print_workload_error(err: Exception) -> None:
    messages = err.args[0] if err.args and isinstance(err.args[0], list) else [str(err)]
    for line in messages:
        print(line, file=sys.stderr)
    print(f"rtaccel: {len(messages)} error(s) in the workload", file=sys.stderr)


def cmd_analyze(args) -> int:
    try:
        calibration = None if args.no_calibration else runner.load_calibration()
    except runner.RunError as err:
        print(f"rtaccel: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    options = {"horizon": args.horizon, "paper_blocking": args.paper_blocking,
               "calibration": calibration}
    try:
        workload, results = rta.analyze_file(args.workload, args.horizon, args.paper_blocking,
                                             machine_cores=args.cores, calibration=calibration,
                                             gang=args.gang)
    except _core.WorkloadError as err:
        _print_workload_error(err)
        return EXIT_BAD_INPUT
    options["gang"] = rta.workload_gang_scheduled(workload, args.gang)
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


def _check_workload(path: str) -> bool:
    """Loads the workload first so that its errors come as `file:line: what`."""
    try:
        _core.load_workload(path)
    except _core.WorkloadError as err:
        _print_workload_error(err)
        return False
    return True


def cmd_run(args) -> int:
    if not _check_workload(args.workload):
        return EXIT_BAD_INPUT
    try:
        status = runner.run(args.workload, args.policy, args.duration, args.out, socket=args.socket,
                            work_fraction=args.work_fraction, progress=not args.quiet,
                            calibration=not args.no_calibration, gang=args.gang,
                            best_effort=args.best_effort, flow_control=not args.no_flow_control,
                            fail_links=args.fail_link)
    except (runner.RunError, accel.AccelError) as err:
        print(f"rtaccel: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if status in (0, 130) and (Path(args.out) / "summary.json").exists():
        print(runner.format_compare([runner.load_summary(args.out)]))
        print(f"# results: {args.out}/summary.json, {args.out}/trace.json (open in ui.perfetto.dev), "
              f"{args.out}/latency.csv")
    return status


def cmd_compare(args) -> int:
    try:
        summaries = [runner.load_summary(f) for f in args.folders]
    except runner.RunError as err:
        print(f"rtaccel: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps({"runs": [{"folder": s["folder"], "policy": s["policy"]} for s in summaries],
                          "paam_max_vs": runner.critical_ratios(summaries)}, indent=2))
    else:
        print(runner.format_compare(summaries))
    # 1: the property the runs check does not hold, as for analyze.
    over = any(s["policy"] == "paam" and s.get("critical_bounds_held") is False for s in summaries)
    return EXIT_UNSCHEDULABLE if over else EXIT_OK


def cmd_report(args) -> int:
    try:
        table, pngs = runner.report(args.folders, args.out)
    except runner.RunError as err:
        print(f"rtaccel: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(table)
    print(f"# {len(pngs)} CDF plots: {Path(pngs[0]).parent}/cdf_*.png" if pngs else "# no chains")
    return EXIT_OK


def cmd_calibrate(args) -> int:
    try:
        doc = runner.calibrate(requests=args.requests, iterations=args.iterations)
    except accel.AccelError as err:
        print(f"rtaccel: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"# this machine: epsilon (server overhead per request, p99) {doc['epsilon_us']:.1f} us, "
          f"kappa (preemption cost, p99) {doc['kappa_us']:.1f} us, release jitter (timer "
          f"wake-up, p99) {doc['release_jitter_us']:.1f} us")
    print(f"# written to {doc['path']}: `rtaccel analyze` and `rtaccel run` now use at least these")
    return EXIT_OK


def cmd_server(server_args: list) -> int:
    """Replaces this process with the daemon, so that signals, the exit status
    and --ready-fd reach it unchanged. Its arguments are its own: argparse
    never sees them."""
    try:
        binary = str(accel.binary("rtaccel-server"))
    except accel.AccelError as err:
        print(f"rtaccel: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    os.execv(binary, [binary, *server_args])


def cmd_demo(args) -> int:
    workload = str(Path(args.examples) / DEMO_WORKLOAD)
    if not _check_workload(workload):
        return EXIT_BAD_INPUT
    print(f"# rtaccel demo: {DEMO_WORKLOAD} under ros2, picas and paam, {args.duration:g} s each")
    try:
        status, folders = runner.demo(workload, args.duration, args.out, progress=not args.quiet)
        if status != 0:
            return status
        table, pngs = runner.report(folders)
    except (runner.RunError, accel.AccelError) as err:
        print(f"rtaccel: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(table)
    print(f"# report: {Path(pngs[0]).parent}/ (compare.txt, cdf_*.png); traces: "
          f"{args.out}/<policy>/trace.json (open in ui.perfetto.dev)")
    return EXIT_OK


def cmd_shim(args) -> int:
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    modes = [m for m, on in (("trace", args.trace), ("pi", args.pi),
                             ("phase-fair", args.phase_fair), ("boost", args.boost)) if on]
    try:
        if not command:
            raise locks.LockToolError("no command given (rtaccel shim [OPTIONS] -- CMD ...)")
        folder = locks.new_run_folder(command, args.out) if args.trace else None
        status = locks.run_under_shim(command, modes, folder, args.ceiling,
                                      bwlock=args.bwlock, bwlock_threshold=args.bwlock_threshold)
    except locks.LockToolError as err:
        print(f"rtaccel shim: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if folder is not None:
        traced = len(locks.traces_in(folder))
        print(f"# rtaccel shim: {traced} process{'es' if traced != 1 else ''} traced, in {folder}/ "
              f"(rtaccel lockstat {folder}; open its *.trace.json in ui.perfetto.dev)",
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
        result = accel.run_bench(what, extra, fifo=not args.no_fifo, backend=args.backend,
                                 device=args.device)
    except accel.AccelError as err:
        print(f"rtaccel bench: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _print_result(result, args.json, formatter)


def cmd_bench_request_overhead(args) -> int:
    extra = ["--wait", args.wait, "--requests", str(args.requests), "--kernel-us", str(args.kernel_us)]
    if not args.remote:
        if args.dds:
            print("rtaccel bench: --dds goes with --remote", file=sys.stderr)
            return EXIT_BAD_INPUT
        return _bench(args, "request-overhead", extra, accel.format_overhead)
    if args.backend != "cpu":
        print("rtaccel bench: --remote runs the cpu backend", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        result = {"local": accel.run_bench("request-overhead", extra, fifo=not args.no_fifo),
                  "remote": accel.run_remote_bench("request-overhead", extra, fifo=not args.no_fifo)}
        if args.dds:
            # the busy request's bytes, as the remote client sends them
            result["dds"] = accel.run_dds_roundtrip(8, min(args.requests, 1000))
    except accel.AccelError as err:
        print(f"rtaccel bench: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return _print_result(result, args.json, accel.format_overhead_paths)


def cmd_bench_preemption(args) -> int:
    return _bench(args, "preemption", ["--iterations", str(args.iterations)], accel.format_preemption)


def cmd_bench_gang_preemption(args) -> int:
    """Runs rtaccel-gang-bench: its table, or its JSON as it prints it."""
    cmd = [str(accel.binary("rtaccel-gang-bench")), "--rounds", str(args.rounds),
           "--threads", args.threads]
    if args.json:
        cmd.append("--json")
    return _exec(cmd)


def cmd_bench_gang_synthetic(args) -> int:
    """Runs rtaccel-gang-synthetic; with --out, keeps its JSON and traces there
    and draws the timeline and the CDFs."""
    cmd = [str(accel.binary("rtaccel-gang-synthetic")), "--duration", str(args.duration),
           "--split", str(args.split)]
    if args.llc:
        cmd += ["--llc", args.llc]
    if not args.out:
        return _exec(cmd + (["--json"] if args.json else []))
    from rtaccel import isolate

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rc = subprocess.run(cmd + ["--trace", str(out)] + (["--json"] if args.json else []),
                        preexec_fn=accel.stop_with_parent).returncode
    if rc:
        return rc
    for png in isolate.synthetic_figures(out):
        print(f"# {png}", file=sys.stderr)
    return 0


def cmd_bench_gang_dnn(args) -> int:
    from rtaccel import gang_dnn

    try:
        result = gang_dnn.run(Path(args.out), seconds=args.duration, threads=args.threads)
    except gang_dnn.DnnBenchError as err:
        print(f"rtaccel: {err}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=1) if args.json else gang_dnn.format_result(result))
    print(f"# {Path(args.out) / 'gang_dnn_cdf.png'}", file=sys.stderr)
    return 0


def _tool_json(tool: str, what: str, extra: list[str]) -> tuple[int, dict | None]:
    """Runs one experiment of a benchmark program that prints one JSON
    object; (exit status, the object). 77: it cannot run here, and said why."""
    proc = subprocess.run([str(accel.binary(tool)), what, *extra], capture_output=True, text=True,
                          preexec_fn=accel.stop_with_parent)
    if proc.returncode == 77:
        print(f"rtaccel: {(proc.stderr or proc.stdout).strip()}", file=sys.stderr)
        return 77, None
    if proc.returncode != 0:
        print(f"rtaccel: {tool} {what} failed: {proc.stderr.strip()}", file=sys.stderr)
        return 1, None
    return 0, json.loads(proc.stdout)


def _regulator_bench(what: str, extra: list[str]) -> tuple[int, dict | None]:
    return _tool_json("rtaccel-regulator-bench", what, extra)


def cmd_bench_net_overhead(args) -> int:
    """The flow-control layer against its raw transport, transfer by
    transfer."""
    extra = ["--transport", args.transport, "--rate", args.rate] + \
        (["--sizes", args.sizes] if args.sizes else []) + (["--chunk", args.chunk] if args.chunk else []) + \
        (["--samples", str(args.samples)] if args.samples else [])
    rc, result = _tool_json("rtaccel-net-bench", "overhead", extra)
    if rc:
        return rc
    if args.dds and (rc := _add_dds(result, "overhead", ["--sizes", ",".join(
            _size_label(r["size"]) for r in result["sizes"])])):
        return rc
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"one transfer at a time over {result['transport']} (link {result['link_rate']}), one-way, "
          f"sender to consumer; chunk {result['chunk'] >> 10} KiB, window {result['window'] >> 10} KiB; "
          "overhead: median of paired differences")
    dds = " dds p50 us" if args.dds else ""
    print(f"{'size':>8} {'raw p50 us':>11} {'flow p50 us':>12} {'overhead us':>12} {'%':>7} "
          f"{'raw, open window':>17}{dds}")
    for r in result["sizes"]:
        print(f"{_size_label(r['size']):>8} {r['raw_p50_us']:11.1f} {r['flow_p50_us']:12.1f} "
              f"{r['overhead_us']:12.1f} {r['overhead_pct']:7.2f} {r['raw_open_p50_us']:17.1f}"
              + (f" {r['dds_p50_us']:11.1f}" if args.dds else ""))
    return 0


def cmd_bench_net_priority(args) -> int:
    """A high-priority flow under three lower ones, raw and with flow
    control (Fig. 13), and the order of equal-priority flows (Fig. 12)."""
    extra = ["--transport", args.transport, "--rate", args.rate] + \
        (["--sizes", args.sizes] if args.sizes else [])
    rc, result = _tool_json("rtaccel-net-bench", "priority", extra)
    if rc:
        return rc
    if args.dds and (rc := _add_dds(result, "priority", ["--rate", args.rate, "--sizes", ",".join(
            _size_label(r["size"]) for r in result["sizes"])])):
        return rc
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"high-priority transfer under three lower-priority flows, {result['transport']}, "
          f"link {result['link_rate']}, {result['samples']} samples; one {result['chunk'] >> 10} KiB "
          f"chunk alone: {result['chunk_us']:.0f} us")
    dds = f" {'dds solo':>9} {'dds p50':>8} {'dds max':>8}" if args.dds else ""
    print(f"{'size':>8} {'solo ms':>8} {'raw min':>8} {'raw p50':>8} {'raw max':>8} "
          f"{'flow min':>9} {'flow p50':>9} {'flow max':>9}{dds}")
    for r in result["sizes"]:
        print(f"{_size_label(r['size']):>8} {r['solo_us'] / 1e3:8.2f} {r['raw_min_us'] / 1e3:8.2f} "
              f"{r['raw_p50_us'] / 1e3:8.2f} {r['raw_max_us'] / 1e3:8.2f} {r['flow_min_us'] / 1e3:9.2f} "
              f"{r['flow_p50_us'] / 1e3:9.2f} {r['flow_max_us'] / 1e3:9.2f}"
              + (f" {r['dds_solo_us'] / 1e3:9.2f} {r['dds_p50_us'] / 1e3:8.2f} {r['dds_max_us'] / 1e3:8.2f}"
                 if args.dds else ""))
    eq = result["equal_priority"]
    print(f"{eq['flows']} flows of equal priority, {eq['transfers_each']} transfers each: arrived in the "
          f"order sent: raw {eq['raw_in_order_pct']:.1f}%, flow control {eq['flow_in_order_pct']:.1f}%")
    return 0


def _add_dds(result: dict, what: str, extra: list[str]) -> int:
    """The same traffic over Cyclone DDS, merged into RESULT size by size."""
    rc, dds = _tool_json("rtaccel-dds-bench", what, extra)
    if rc:
        return rc
    result["dds"] = dds["middleware"]
    by_size = {r["size"]: r for r in dds["sizes"]}
    for r in result["sizes"]:
        r.update({k: v for k, v in by_size[r["size"]].items() if k.startswith("dds_")})
    return 0


def _size_label(n: int) -> str:
    for unit, shift in (("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _sizes(text: str) -> str:
    for tok in text.split(","):
        m = re.fullmatch(r"([1-9][0-9]*)([KkMm]?)", tok)
        if not m:
            raise argparse.ArgumentTypeError(f"expected sizes like 64K,1M,32M separated by commas, got {text!r}")
        n = int(m.group(1)) << {"": 0, "k": 10, "m": 20}[m.group(2).lower()]
        if n > 64 << 20:
            raise argparse.ArgumentTypeError(f"size {tok} is larger than 64M")
    return text


def cmd_bench_regulator(args) -> int:
    """The regulator's own figures: onset, budget ratio, period accuracy,
    overhead; beside them the cgroup freeze it does not use and the
    bandwidth lock's take + release."""
    rc, run = _regulator_bench("regulator", ["--duration", str(args.duration),
                                             "--threshold", str(args.threshold)])
    if rc:
        return rc
    rc, lock = _regulator_bench("lock", [])
    if rc:
        return rc
    core = run["regulator"]["cores"][0]
    result = {
        "meter": run["regulator"]["meter"],
        "period_us": run["regulator"]["period_us"],
        "threshold_mbps": run["threshold_mbps"],
        "periods": core["periods"],
        "throttled_periods": core["throttled_periods"],
        "onset_p50_us": core["onset_p50_us"],
        "onset_p99_us": core["onset_p99_us"],
        "budget_ratio": core["budget_ratio_p50"],
        "budget_ratio_p99": core["budget_ratio_p99"],
        "late_p50_us": core["late_p50_us"],
        "late_p99_us": core["late_p99_us"],
        "overhead_cpu": core["overhead_cpu"],
        "freeze_p50_us": run["freeze_p50_us"],
        "freeze_p99_us": run["freeze_p99_us"],
        "bwlock_take_release_ns": lock["take_release_ns"],
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"regulator on core {core['core']}, {result['meter']} meter, period {result['period_us']:.0f} us, "
          f"threshold {result['threshold_mbps']} MB/s, {result['throttled_periods']}/{result['periods']} "
          "periods throttled")
    print(f"  throttle onset after the budget is spent: p50 {result['onset_p50_us']:.1f} us, "
          f"p99 {result['onset_p99_us']:.1f} us")
    print(f"  budget a hog got / its budget:            p50 {result['budget_ratio']:.3f}, "
          f"p99 {result['budget_ratio_p99']:.3f}")
    print(f"  period start late by:                     p50 {result['late_p50_us']:.1f} us, "
          f"p99 {result['late_p99_us']:.1f} us")
    print(f"  regulator CPU time (not parking):         {100 * result['overhead_cpu']:.2f}% of the core")
    print(f"  freezing the cgroup instead (not used):   p50 {result['freeze_p50_us']:.1f} us, "
          f"p99 {result['freeze_p99_us']:.1f} us")
    print(f"  bandwidth lock take + release:            {result['bwlock_take_release_ns']:.1f} ns")
    return 0


def cmd_bench_tfs(args) -> int:
    rc, result = _regulator_bench("tfs", ["--duration", str(args.duration),
                                          "--threshold", str(args.threshold)])
    if rc:
        return rc
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"memory-bound and CPU-bound best-effort tasks on a core regulated at "
          f"{result['threshold_mbps']} MB/s")
    print(f"{'scheduler':10} {'memory task':>12} {'CPU task':>10} {'throttled ms':>13}")
    for r in result["runs"]:
        name = "CFS" if r["rho"] == 0 else f"TFS rho={r['rho']:.0f}"
        print(f"{name:10} {100 * r['mem_share']:11.1f}% {100 * r['cpu_share']:9.1f}% "
              f"{r['throttled_ms']:13.1f}")
    return 0


def cmd_bench_bwlock(args) -> int:
    rc, result = _regulator_bench("bwlock", ["--duration", str(args.duration),
                                             "--thresholds", args.thresholds])
    if rc:
        return rc
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print("critical task (half the LLC, every 20 ms) beside a memory hog on the other core")
    print(f"{'configuration':22} {'p50 ms':>8} {'p99 ms':>8}")
    for r in result["runs"]:
        name = r["config"] if r["threshold_mbps"] < 0 else f"bwlock {r['threshold_mbps']} MB/s"
        print(f"{name:22} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f}")
    return 0


def cmd_isolate(args) -> int:
    """rtaccel isolate ...: rtaccel-isolate, with its own arguments."""
    rest = args.args
    return _exec([str(accel.binary("rtaccel-isolate")), args.command, *rest])


def _exec(cmd: list) -> int:
    """Becomes the program (so that signals reach it: a best-effort co-runner
    is stopped with SIGTERM and reports its bandwidth)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cmd[0], cmd)
    return 1  # not reached


def _thread_counts(text: str) -> str:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected thread counts separated by commas, got {text!r}")
    if not values or any(v < 1 or v > 8 for v in values):
        raise argparse.ArgumentTypeError("thread counts must be in 1..8")
    return ",".join(str(v) for v in values)


def cmd_membench(args) -> int:
    cmd = [str(accel.binary("rtaccel-membench")), args.benchmark]
    if args.size:
        cmd += ["--size", args.size]
    if args.duration:
        cmd += ["--duration", str(args.duration)]
    if args.json:
        cmd.append("--json")
    return _exec(cmd)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}")
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError("seconds must be in (0, 86400]")
    return value


def _link_failure(text: str) -> str:
    link, at, when = text.rpartition("@")[0], "@" in text, text.rpartition("@")[2]
    try:
        seconds = float(when)
    except ValueError:
        seconds = -1.0
    if not at or not link or not 0 <= seconds <= 86400:
        raise argparse.ArgumentTypeError(f"expected LINK@SECONDS (eth0@2.5), got {text!r}")
    return text


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    if not 0.01 <= value <= 1:
        raise argparse.ArgumentTypeError("the work fraction must be in [0.01, 1]")
    return value


def _split(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}")
    if not 0.5 <= value <= 0.95:
        raise argparse.ArgumentTypeError("the split must be in [0.5, 0.95]")
    return value


def _whole_number(low: int, high: int, what: str, unit: str = ""):
    """An argparse type: a whole number in LOW..HIGH; WHAT names the range
    in the message ("a kernel of 0..1000000 us")."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number{unit}: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(what.format(low=low, high=high))
        return value
    return parse


_kernel_us = _whole_number(0, 1000000, "a kernel of {low}..{high} us", " of microseconds")
# rtaccel-net-bench's --samples: its MAX_SAMPLES is 1000.
_net_samples = _whole_number(20, 1000, "{low}..{high} transfers per size")


def _ceiling(text: str) -> int:
    value = _positive_int(text)
    if value > 99:
        raise argparse.ArgumentTypeError("a SCHED_FIFO priority is 1..99")
    return value


def _mbps(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of MB/s: {text!r}") from None
    if not 0 <= value < 2**32 - 1:
        raise argparse.ArgumentTypeError("a threshold is 0..4294967294 MB/s")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rtaccel",
        description="Predictable accelerator-heavy real-time software: analysis, server, executors.")
    parser.add_argument("--version", action="version", version=f"rtaccel {rtaccel.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("server", add_help=False,
                       help="run rtaccel-server, the accelerator server daemon (its options follow; "
                            "rtaccel server --help lists them)")
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=lambda args: cmd_server(args.args))

    p = sub.add_parser("analyze", help="worst-case response time of every chain (PAAM Theorem 1)")
    p.add_argument("workload", help="workload YAML file")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    p.add_argument("--horizon", choices=("deadline", "period"), default="period",
                   help="where the fixed-point iteration gives up (default: period, so a miss "
                        "is reported with its size)")
    p.add_argument("--paper-blocking", action="store_true",
                   help="charge lower-priority blocking with CPU time only, as printed in the paper")
    p.add_argument("--no-calibration", action="store_true",
                   help="ignore this machine's `rtaccel calibrate` overheads")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--gang", dest="gang", action="store_const", const=True, default=None,
                   help="analyse under one-gang-at-a-time (default: the workload's gang_scheduling)")
    g.add_argument("--no-gang", dest="gang", action="store_const", const=False,
                   help="analyse without gang scheduling")
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
    p.add_argument("--out", default=None,
                   help="with --trace: the run's folder, new or empty (default: a new folder "
                        "per run under rtaccel-shim/, named after the time and the program)")
    p.add_argument("--bwlock", nargs="?", const="default", default=None, metavar="NAME",
                   help="hold bandwidth lock NAME (default: default) during the program's GPU "
                        "segments, so that `rtaccel isolate regulate` throttles best-effort "
                        "cores meanwhile (BWLOCK++)")
    p.add_argument("--bwlock-threshold", type=_mbps, default=0, metavar="MBPS",
                   help="best-effort bandwidth per core the GPU segments allow (default 0)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...")
    p.set_defaults(func=cmd_shim)

    p = sub.add_parser("lockstat", help="summarise traces written by `rtaccel shim --trace`")
    p.add_argument("files", nargs="+",
                   help="a run's folder (or rtaccel-shim/: its newest run) or rtaccel-shim.PID.json "
                        "files")
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

    p = sub.add_parser("bench", help="measure rtaccel-server on this machine")
    bsub = p.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")

    def backend_options(b):
        b.add_argument("--backend", choices=("cpu", "cuda"), default="cpu",
                       help="the server's backend (cpu: the last core is the device)")
        b.add_argument("--device", type=int, default=0, help="cuda: the GPU's number (0)")

    b = bsub.add_parser("request-overhead",
                        help="submit -> worker start -> kernel end -> client resumed, per request")
    b.add_argument("--wait", choices=("suspend", "spin"), default="suspend",
                   help="how the client waits for completion (suspend)")
    b.add_argument("--requests", type=_positive_int, default=20000, help="requests measured (20000)")
    b.add_argument("--kernel-us", type=_kernel_us, default=100, metavar="US",
                   help="length of each busy kernel, subtracted from the round trip (100)")
    b.add_argument("--no-fifo", action="store_true",
                   help="run server workers and client at SCHED_OTHER (no privilege needed)")
    b.add_argument("--remote", action="store_true",
                   help="also as a client on another node: the server in one network namespace with "
                        "its gateway on tcp, the client in another (root)")
    b.add_argument("--dds", action="store_true",
                   help="with --remote: also a Cyclone DDS request and reply between the namespaces")
    b.add_argument("--json", action="store_true", help="print JSON (keys p50_us, p99_us, max_us)")
    backend_options(b)
    b.set_defaults(func=cmd_bench_request_overhead)
    b = bsub.add_parser("preemption",
                        help="delay of a high-bucket request preempting a low-bucket kernel "
                             "(PAAM Table I)")
    b.add_argument("--iterations", type=_positive_int, default=200, help="pairs per kernel (200)")
    b.add_argument("--no-fifo", action="store_true",
                   help="SCHED_OTHER workers: shows what is lost without real preemption")
    b.add_argument("--json", action="store_true", help="print JSON")
    backend_options(b)
    b.set_defaults(func=cmd_bench_preemption)
    b = bsub.add_parser("gang-preemption",
                        help="release of a high gang until the lower gang is stopped on every core "
                             "(RT-Gang Table III), beside plain SCHED_FIFO and other mechanisms")
    b.add_argument("--rounds", type=_positive_int, default=200, help="rounds per row (200)")
    b.add_argument("--threads", type=_thread_counts, default="1,2,4,8",
                   help="lower gang sizes (1,2,4,8)")
    b.add_argument("--json", action="store_true",
                   help="print JSON (p50_us, p99_us, max_us; the same under baseline)")
    b.set_defaults(func=cmd_bench_gang_preemption)

    b = bsub.add_parser("gang-synthetic",
                        help="two 2-thread periodic tasks over 3/4 of the LLC beside best-effort "
                             "memory programs, plain SCHED_FIFO against the gang lock (RT-Gang Fig. 5)")
    b.add_argument("--duration", type=_seconds, default=10.0,
                   help="seconds per co-scheduled phase (10; each task alone half of it)")
    b.add_argument("--split", type=_split, default=2 / 3,
                   help="share of a task's work on its first thread, 0.5..0.95 (0.667)")
    b.add_argument("--llc", help="last-level cache size, e.g. 32M (default: from sysfs)")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.add_argument("--out", help="folder for the traces (Perfetto), the timeline and the CDFs")
    b.set_defaults(func=cmd_bench_gang_synthetic)

    b = bsub.add_parser("gang-dnn",
                        help="a small CNN's inference (ONNX Runtime) as the high gang beside a BwWrite "
                             "task and best-effort programs: solo, co-scheduled, gang (RT-Gang Fig. 6)")
    b.add_argument("--duration", type=_seconds, default=10.0, help="seconds per configuration (10)")
    b.add_argument("--threads", type=_positive_int, help="inference threads (default: one per core)")
    b.add_argument("--out", default="out/gang-dnn", help="folder for the model, JSON and CDF (out/gang-dnn)")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench_gang_dnn)

    b = bsub.add_parser("regulator",
                        help="the memory-bandwidth regulator: throttle onset, budget kept, period "
                             "accuracy, CPU overhead; cgroup freeze beside it; bandwidth lock cost")
    b.add_argument("--duration", type=_seconds, default=5.0, help="seconds of regulation (5)")
    b.add_argument("--threshold", type=_mbps, default=3000, help="threshold in force, MB/s (3000)")
    b.add_argument("--json", action="store_true",
                   help="print JSON (onset_p50_us, onset_p99_us, budget_ratio, ...)")
    b.set_defaults(func=cmd_bench_regulator)
    b = bsub.add_parser("net-overhead", help="the net layer's flow control against its raw transport, "
                                             "64 KiB to 32 MiB, one transfer at a time")
    b.add_argument("--transport", choices=("tcp", "shm", "rdma"), default="tcp", help="transport (tcp)")
    b.add_argument("--sizes", type=_sizes, help="transfer sizes (64K,128K,...,32M)")
    b.add_argument("--rate", default="none",
                   help="tcp: 'none' for loopback, or the rate of a veth link between two namespaces "
                        "as tc writes it (none)")
    b.add_argument("--chunk", type=_sizes, help="the flow-control link's chunk (64K)")
    b.add_argument("--samples", type=_net_samples,
                   help="transfers per size at most, 20..1000 (fewer for the large sizes)")
    b.add_argument("--dds", action="store_true",
                   help="the same transfers over Cyclone DDS beside them (dds_p50_us)")
    b.add_argument("--json", action="store_true",
                   help="print JSON (per size: raw_p50_us, flow_p50_us, overhead_us)")
    b.set_defaults(func=cmd_bench_net_overhead)
    b = bsub.add_parser("net-priority", help="a high-priority flow under three lower ones, raw and with "
                                             "flow control; equal-priority order (RDMA paper Fig. 12/13)")
    b.add_argument("--transport", choices=("tcp", "shm", "rdma"), default="tcp", help="transport (tcp)")
    b.add_argument("--rate", default="1gbit",
                   help="tcp: the rate of the veth link between two namespaces, as tc writes it, or "
                        "'none' for loopback (1gbit)")
    b.add_argument("--sizes", type=_sizes, help="transfer sizes (1M,2M,...,32M)")
    b.add_argument("--dds", action="store_true",
                   help="the same flows over Cyclone DDS on the same link beside them (dds_max_us)")
    b.add_argument("--json", action="store_true",
                   help="print JSON (per size: raw_max_us, flow_max_us, solo_us, chunk_us)")
    b.set_defaults(func=cmd_bench_net_priority)
    b = bsub.add_parser("tfs", help="a memory-bound and a CPU-bound best-effort task on a throttled "
                                    "core under CFS and TFS rho=1, 3 (BWLOCK++ Fig. 5/6)")
    b.add_argument("--duration", type=_seconds, default=5.0, help="seconds per scheduler (5)")
    b.add_argument("--threshold", type=_mbps, default=3000, help="threshold in force, MB/s (3000)")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench_tfs)
    b = bsub.add_parser("bwlock", help="a critical task holding the bandwidth lock beside a memory "
                                       "hog: solo, co-run, regulated at each threshold (BWLOCK++ Fig. 7/8)")
    b.add_argument("--duration", type=_seconds, default=5.0, help="seconds per configuration (5)")
    b.add_argument("--thresholds", default="4000,2000,1000,500,0",
                   help="thresholds in MB/s, comma-separated (4000,2000,1000,500,0)")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench_bwlock)

    p = sub.add_parser("isolate", help="memory-bandwidth regulation: regulate, status, run-be, hold",
                       description="Runs rtaccel-isolate: `regulate` (the regulator daemon), `status` "
                                   "(live, per core), `run-be -- CMD` (CMD as best-effort work), "
                                   "`hold --threshold MBPS -- CMD` (CMD under the bandwidth lock). "
                                   "`rtaccel isolate COMMAND --help` lists each one's options.")
    p.add_argument("command", choices=["regulate", "status", "run-be", "hold"])
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_isolate)

    p = sub.add_parser("membench", help="memory benchmarks for best-effort co-runners (IsolBench-like)")
    p.add_argument("benchmark", choices=("read", "write", "cache"),
                   help="read or write sequentially over --size, or read a set that stays in L1")
    p.add_argument("--size", help="working set, e.g. 8M (default 8M; cache: 16K)")
    p.add_argument("--duration", type=_seconds, help="seconds (default: until SIGTERM or Ctrl-C)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_membench)

    p = sub.add_parser("run", help="run a workload for real and measure its chains")
    p.add_argument("workload", help="workload YAML file")
    p.add_argument("--policy", choices=runner.POLICIES, default="paam",
                   help="executor policy: ros2, picas or paam (default paam)")
    p.add_argument("--duration", type=_seconds, default=10.0, help="seconds measured (10)")
    p.add_argument("--out", default="out", help="result folder (out)")
    p.add_argument("--socket", help="paam: a running rtaccel-server's socket (default: start one)")
    p.add_argument("--work-fraction", type=_fraction, default=0.9,
                   help="share of each WCET that callbacks really run (0.9)")
    p.add_argument("--no-calibration", action="store_true",
                   help="ignore this machine's `rtaccel calibrate` overheads")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--gang", dest="gang", action="store_const", const=True, default=None,
                   help="one real-time gang at a time (default: the workload's gang_scheduling)")
    g.add_argument("--no-gang", dest="gang", action="store_const", const=False,
                   help="no gang scheduling, whatever the workload says")
    p.add_argument("--best-effort", action="append", default=[], metavar="CMD",
                   help="start CMD (a shell command line) beside the workload, SCHED_OTHER, stopped at "
                        "the end; repeatable (e.g. 'rtaccel membench read --size 8M')")
    p.add_argument("--no-flow-control", action="store_true",
                   help="multi-node: topics between nodes without the net layer's flow control (a "
                        "connection per topic, each message in one piece), the baseline")
    p.add_argument("--fail-link", action="append", default=[], metavar="LINK@S", type=_link_failure,
                   help="multi-node: take link LINK down S seconds into the run (fault injection); "
                        "repeatable")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compare", help="side-by-side table of `rtaccel run` results")
    p.add_argument("folders", nargs="+", help="result folders")
    p.add_argument("--json", action="store_true", help="print the paam ratios as JSON")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("report", help="comparison table and CDF plots with the analysis bound")
    p.add_argument("folders", nargs="+", help="result folders")
    p.add_argument("--out", help="folder for the plots (default: report/ beside the first folder)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("calibrate",
                       help="measure this machine's server overhead and preemption cost")
    p.add_argument("--requests", type=_positive_int, default=5000, help="requests timed (5000)")
    p.add_argument("--iterations", type=_positive_int, default=100,
                   help="preemptions per kernel (100)")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("realtime", help="whether real-time priorities are allowed here, why not, "
                                         "and the remedy root can apply")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument("--pid", type=_positive_int, default=None,
                   help="where root can grant real-time priorities, grant them to process PID too "
                        "(a shell: `rtaccel realtime --pid $$`), and so to what it starts")
    p.set_defaults(func=cmd_realtime)

    p = sub.add_parser("demo", help="the main job: the Autoware reference system under "
                                    "ros2, picas and paam, compared")
    p.add_argument("--duration", type=_seconds, default=40.0, help="seconds per policy (40)")
    p.add_argument("--out", default="out/demo", help="result folder (out/demo)")
    p.add_argument("--examples", default=str(EXAMPLES_DIR), help="folder of the example workloads")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=cmd_demo)
    return parser


def cmd_realtime(args) -> int:
    before = realtime.diagnose()
    after = before if before.allowed else realtime.ensure(quiet=args.json,
                                                          also=(args.pid,) if args.pid else ())
    if args.json:
        print(json.dumps({"allowed": after.allowed, "granted": after.allowed and not before.allowed,
                          "reason": before.reason}))
    elif after.allowed:
        print("real-time priorities: allowed" + ("" if before.allowed else " (granted: see above)"))
    return EXIT_OK if after.allowed else 1


# Commands that start real-time work: before them, real-time priorities are
# made available where root can, or their absence is said once.
REALTIME_COMMANDS = {"server", "run", "demo", "bench", "lockdemo", "isolate", "calibrate", "shim"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in REALTIME_COMMANDS and not {"-h", "--help"} & set(argv):
        realtime.ensure()
    if argv and argv[0] == "server":
        return cmd_server(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
