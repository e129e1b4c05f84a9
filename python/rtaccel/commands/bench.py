"""The rtaccel benchmarks (bench): the server's overheads and preemption,
the gang lock, the net layer, the regulator and the bandwidth lock."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from rtaccel import _core, accel, isolate, realtime, runner
from rtaccel.commands import common
from rtaccel.commands.run import EXAMPLES_DIR
from rtaccel.errors import EXIT_BAD_INPUT, EXIT_CANNOT_RUN_HERE, EXIT_OK, EXIT_RUNTIME


def _fifo(args) -> bool:
    """Whether the server's workers and the client run at SCHED_FIFO: unless
    --no-fifo, where this process may use it. Where it may not, the run goes
    on as with --no-fifo, as `rtaccel run` does, and says so."""
    if args.no_fifo:
        return False
    if realtime.diagnose().allowed:
        return True
    print("rtaccel bench: note: without SCHED_FIFO here, the server's workers and the client run at "
          "normal priority, as with --no-fifo: the figures are not a real-time run's", file=sys.stderr)
    return False


def _bench(args, what: str, extra: list, formatter) -> int:
    try:
        result = accel.run_bench(what, extra, fifo=_fifo(args), backend=args.backend,
                                 device=args.device)
    except accel.AccelError as err:
        return common.fail("rtaccel bench", err)
    return common.print_result(result, args.json, formatter)


def cmd_bench_request_overhead(args) -> int:
    if args.idle and (args.clients or args.buckets or args.remote):
        print("rtaccel bench: --idle goes with one local client (no --clients, --buckets or --remote)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.clients or args.buckets:
        return _request_overhead_at_scale(args)
    extra = ["--wait", args.wait, "--requests", str(args.requests), "--kernel-us", str(args.kernel_us),
             "--gap-us", str(args.gap_us), "--idle", str(args.idle)]
    if not args.remote:
        if args.dds:
            print("rtaccel bench: --dds goes with --remote", file=sys.stderr)
            return EXIT_BAD_INPUT
        return _bench(args, "request-overhead", extra, accel.format_overhead)
    if args.backend != "cpu":
        print("rtaccel bench: --remote runs the cpu backend", file=sys.stderr)
        return EXIT_BAD_INPUT
    cores = len(os.sched_getaffinity(0))
    if args.wait == "spin" and cores < 4:
        print(f"rtaccel bench: note: the two nodes of --remote share this machine's {cores} cores; a remote "
              "client spinning on one and the server's worker on another leave the gateway none, so the remote "
              "figures for spin are not two nodes' (docs/benchmarks.md)", file=sys.stderr)
    fifo = _fifo(args)
    try:
        result = {"local": accel.run_bench("request-overhead", extra, fifo=fifo),
                  "remote": accel.run_remote_bench("request-overhead", extra, fifo=fifo)}
        if args.dds:
            # the busy request's bytes, as the remote client sends them
            result["dds"] = accel.run_dds_roundtrip(8, min(args.requests, 1000))
    except accel.AccelError as err:
        return common.fail("rtaccel bench", err)
    return common.print_result(result, args.json, accel.format_overhead_paths)


def _request_overhead_at_scale(args) -> int:
    """Every combination of --clients and --buckets (a bucket needs a client)
    beside the one-client baseline; with --remote, through the gateway too."""
    clients, buckets = args.clients or [1], args.buckets or [1]
    if args.wait == "spin" and max(clients) > 1:
        print("rtaccel bench: --wait spin takes one client (clients sharing a core suspend)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if max(buckets) > max(clients):
        print("rtaccel bench: each of the --buckets needs a client: at most the most --clients", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.dds or args.backend != "cpu":
        print("rtaccel bench: --clients and --buckets run the cpu backend, without --dds", file=sys.stderr)
        return EXIT_BAD_INPUT
    runs = [("local", accel.run_bench)] + ([("remote", accel.run_remote_bench)] if args.remote else [])
    try:
        result = accel.overhead_at_scale(runs, clients, buckets, args.rounds, args.wait, args.requests,
                                         args.kernel_us, fifo=_fifo(args))
    except accel.AccelError as err:
        return common.fail("rtaccel bench", err)
    return common.print_result(result, args.json, accel.format_overhead_at_scale)


def cmd_bench_corunners(args) -> int:
    try:
        result = accel.kernels_beside_corunners(args.rounds, args.iterations, args.size, fifo=_fifo(args))
    except accel.AccelError as err:
        return common.fail("rtaccel bench", err)
    return common.print_result(result, args.json, accel.format_corunners)


def cmd_bench_preemption(args) -> int:
    return _bench(args, "preemption", ["--iterations", str(args.iterations)], accel.format_preemption)


def cmd_bench_registrations(args) -> int:
    # The chains' executors on the device's core: not the server's (rule R1).
    device, _ = accel.default_cores()
    extra = ["--callbacks", ",".join(str(n) for n in args.callbacks), "--executor-core", str(device)]
    try:
        result = accel.run_bench("registrations", extra, fifo=_fifo(args))
    except accel.AccelError as err:
        return common.fail("rtaccel bench", err)
    return common.print_result(result, args.json, accel.format_registrations)


def cmd_bench_gang_preemption(args) -> int:
    """Runs rtaccel-gang-bench: its table, or its JSON as it prints it. With
    --no-rt-throttling, the kernel's real-time throttling is off for the run
    and put back after it, however it ends."""
    cmd = [str(accel.binary("rtaccel-gang-bench")), "--rounds", str(args.rounds),
           "--threads", args.threads]
    if args.json:
        cmd.append("--json")
    if not args.no_rt_throttling:
        return common.exec_program(cmd)
    off = realtime.no_rt_throttling("rtaccel bench gang-preemption")
    try:
        off.__enter__()
    except OSError as err:
        print(err.strerror, file=sys.stderr)
        return EXIT_CANNOT_RUN_HERE
    try:
        return subprocess.run(cmd).returncode
    finally:
        off.__exit__(None, None, None)


def cmd_bench_gang_synthetic(args) -> int:
    """Runs rtaccel-gang-synthetic; with --out, keeps its JSON and traces there
    and draws the timeline and the CDFs."""
    cmd = [str(accel.binary("rtaccel-gang-synthetic")), "--duration", str(args.duration),
           "--split", str(args.split)]
    if args.llc:
        cmd += ["--llc", args.llc]
    if not args.out:
        return common.exec_program(cmd + (["--json"] if args.json else []))
    from rtaccel import isolate

    if not common.make_results_folder("rtaccel bench gang-synthetic", args.out):
        return EXIT_BAD_INPUT
    out = Path(args.out)
    rc = subprocess.run(cmd + ["--trace", str(out)] + (["--json"] if args.json else []),
                        preexec_fn=accel.stop_with_parent).returncode
    if rc:
        return rc
    for png in isolate.synthetic_figures(out):
        print(f"# {png}", file=sys.stderr)
    return EXIT_OK


def cmd_bench_gang_dnn(args) -> int:
    from rtaccel import gang_dnn

    if not common.make_results_folder("rtaccel bench gang-dnn", args.out):
        return EXIT_BAD_INPUT
    try:
        result = gang_dnn.run(Path(args.out), seconds=args.duration, threads=args.threads)
    except gang_dnn.DnnBenchError as err:
        return common.fail("rtaccel", err)
    print(json.dumps(result, indent=1) if args.json else gang_dnn.format_result(result))
    print(f"# {Path(args.out) / 'gang_dnn_cdf.png'}", file=sys.stderr)
    return EXIT_OK


def _tool_json(tool: str, what: str, extra: list[str]) -> tuple[int, dict | None]:
    """Runs one experiment of a benchmark program that prints one JSON
    object; (exit status, the object): EXIT_CANNOT_RUN_HERE where it cannot
    run here, and said why; EXIT_RUNTIME where it failed."""
    proc = subprocess.run([str(accel.binary(tool)), what, *extra], capture_output=True, text=True,
                          preexec_fn=accel.stop_with_parent)
    if proc.returncode == 77:
        print(f"rtaccel: {(proc.stderr or proc.stdout).strip()}", file=sys.stderr)
        return EXIT_CANNOT_RUN_HERE, None
    if proc.returncode != 0:
        print(f"rtaccel: {tool} {what} failed: {proc.stderr.strip()}", file=sys.stderr)
        return EXIT_RUNTIME, None
    return EXIT_OK, json.loads(proc.stdout)


def _regulator_bench(what: str, extra: list[str]) -> tuple[int, dict | None]:
    return _tool_json("rtaccel-regulator-bench", what, extra)


# rtaccel's goal for flow control: at most 2% or 20 us (the larger) over the
# raw transport with the same window, at every size.
NET_OVERHEAD_GOAL_PCT, NET_OVERHEAD_GOAL_US = 2.0, 20.0


def net_overhead_goal(sizes: list[dict]) -> dict:
    """Whether each size's overhead is within the goal, and all of them."""
    over = [r["size"] for r in sizes
            if r["overhead_us"] > max(NET_OVERHEAD_GOAL_US, r["raw_p50_us"] * NET_OVERHEAD_GOAL_PCT / 100)]
    return {"limit_pct": NET_OVERHEAD_GOAL_PCT, "limit_us": NET_OVERHEAD_GOAL_US, "sizes_over": over,
            "met": not over}


def cmd_bench_net_overhead(args) -> int:
    """The flow-control layer against its raw transport, transfer by
    transfer, and the goal judged against it."""
    rc, result = _tool_json("rtaccel-net-bench", "overhead",
                            ["--transport", args.transport] + _transfer_options(args))
    if rc:
        return rc
    result["goal"] = net_overhead_goal(result["sizes"])
    if args.dds and (rc := _add_dds(result, "overhead", ["--sizes", ",".join(
            _size_label(r["size"]) for r in result["sizes"])])):
        return rc
    if args.json:
        print(json.dumps(result, indent=1))
        return EXIT_OK
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
    goal = result["goal"]
    print(f"# goal: at most {goal['limit_pct']:.0f}% or {goal['limit_us']:.0f} us (the larger) over raw at every "
          "size: " + ("met" if goal["met"] else "NOT met at " + ", ".join(map(_size_label, goal["sizes_over"]))))
    return EXIT_OK


def cmd_bench_net_zerocopy(args) -> int:
    """MSG_ZEROCOPY against plain sends on the raw TCP path, in the
    flow-control layer's chunks and window: whether it would pay here."""
    rc, result = _tool_json("rtaccel-net-bench", "zerocopy", _transfer_options(args))
    if rc:
        return rc
    if args.json:
        print(json.dumps(result, indent=1))
        return EXIT_OK
    print(f"one transfer at a time over tcp (link {result['link_rate']}) in {result['chunk'] >> 10} KiB sends, "
          f"window {result['window'] >> 10} KiB; one-way, sender to consumer; the two in turn")
    print(f"taken before a send would block, nothing read: {result['send_unread_bytes']} bytes plain, "
          f"{result['zerocopy_unread_bytes']} zero-copy")
    print(f"{'size':>8} {'send p50 us':>12} {'zerocopy p50 us':>16} {'ratio':>6} {'completions us':>15} "
          f"{'copied %':>9}")
    for r in result["sizes"]:
        print(f"{_size_label(r['size']):>8} {r['send_p50_us']:12.1f} {r['zerocopy_p50_us']:16.1f} "
              f"{r['zerocopy_p50_us'] / r['send_p50_us']:6.2f} {r['completions_p50_us']:15.1f} "
              f"{r['copied_pct']:9.1f}")
    return EXIT_OK


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
        return EXIT_OK
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
    return EXIT_OK


def _add_dds(result: dict, what: str, extra: list[str]) -> int:
    """The same traffic over Cyclone DDS, merged into RESULT size by size."""
    rc, dds = _tool_json("rtaccel-dds-bench", what, extra)
    if rc:
        return rc
    result["dds"] = dds["middleware"]
    by_size = {r["size"]: r for r in dds["sizes"]}
    for r in result["sizes"]:
        r.update({k: v for k, v in by_size[r["size"]].items() if k.startswith("dds_")})
    return EXIT_OK


def _size_label(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


_SIZE = re.compile(r"([1-9][0-9]*)([KkMmGg]?)")


def _size_bytes(tok: str) -> int | None:
    """Bytes of a size such as 64K, 1M or 1G; None if it is none."""
    m = _SIZE.fullmatch(tok)
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()] if m else None


def _sizes(text: str) -> str:
    for tok in text.split(","):
        n = _size_bytes(tok)
        if n is None:
            raise argparse.ArgumentTypeError(f"expected sizes like 64K,1M,32M separated by commas, got {text!r}")
        if n > 64 << 20:
            raise argparse.ArgumentTypeError(f"size {tok} is larger than 64M")
    return text


def _one_size(what: str, lowest: int, highest: int):
    """An argument type: one size of LOWEST..HIGHEST bytes."""
    def size(text: str) -> str:
        n = _size_bytes(text)
        if n is None or not lowest <= n <= highest:
            raise argparse.ArgumentTypeError(f"{what} of {_size_label(lowest)}..{_size_label(highest)}, "
                                             f"got {text!r}")
        return text
    return size


_chunk = _one_size("a chunk", 1 << 10, 16 << 20)  # as rtaccel-net-bench takes it
_hog_size = _one_size("a working set", 1 << 10, 1 << 30)  # as rtaccel-membench takes it


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
        return EXIT_OK
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
    return EXIT_OK


def cmd_bench_tfs(args) -> int:
    rc, result = _regulator_bench("tfs", ["--duration", str(args.duration),
                                          "--threshold", str(args.threshold)])
    if rc:
        return rc
    if args.json:
        print(json.dumps(result, indent=1))
        return EXIT_OK
    print(f"memory-bound and CPU-bound best-effort tasks on a core regulated at "
          f"{result['threshold_mbps']} MB/s")
    print(f"{'scheduler':10} {'memory task':>12} {'CPU task':>10} {'throttled ms':>13}")
    for r in result["runs"]:
        name = "CFS" if r["rho"] == 0 else f"TFS rho={r['rho']:.0f}"
        print(f"{name:10} {100 * r['mem_share']:11.1f}% {100 * r['cpu_share']:9.1f}% "
              f"{r['throttled_ms']:13.1f}")
    return EXIT_OK


def cmd_bench_bwlock(args) -> int:
    rc, result = _regulator_bench("bwlock", ["--duration", str(args.duration),
                                             "--thresholds", args.thresholds])
    if rc:
        return rc
    if args.json:
        print(json.dumps(result, indent=1))
        return EXIT_OK
    print("critical task (half the LLC, every 20 ms) beside a memory hog on the other core")
    print(f"{'configuration':22} {'p50 ms':>8} {'p99 ms':>8}")
    for r in result["runs"]:
        name = r["config"] if r["threshold_mbps"] < 0 else f"bwlock {r['threshold_mbps']} MB/s"
        print(f"{name:22} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f}")
    return EXIT_OK


_split = common.number(0.5, 0.95, "the split must be in [0.5, 0.95]")


_kernel_us = common.whole_number(0, 1000000, "a kernel of {low}..{high} us", " of microseconds")
_gap_us = common.whole_number(0, 1000000, "a gap of {low}..{high} us", " of microseconds")


# rtaccel-net-bench's --samples: its MAX_SAMPLES is 1000.
_net_samples = common.whole_number(20, 1000, "{low}..{high} transfers per size")


def _transfer_arguments(b, sizes: str, chunk: str) -> None:
    """The options of rtaccel-net-bench's runs of one transfer at a time
    (its parse_transfer_options): SIZES and CHUNK say their defaults."""
    b.add_argument("--sizes", type=_sizes, help=f"transfer sizes ({sizes})")
    b.add_argument("--rate", default="none",
                   help="tcp: 'none' for loopback, or the rate of a veth link between two namespaces "
                        "as tc writes it (none)")
    b.add_argument("--chunk", type=_chunk, help=f"{chunk}, 1K..16M (64K)")
    b.add_argument("--samples", type=_net_samples,
                   help="transfers per size at most, 20..1000 (fewer for the large sizes)")


def _transfer_options(args) -> list[str]:
    """What _transfer_arguments parsed, as rtaccel-net-bench's options."""
    return ["--rate", args.rate] + (["--sizes", args.sizes] if args.sizes else []) + \
        (["--chunk", args.chunk] if args.chunk else []) + (["--samples", str(args.samples)] if args.samples else [])


def cmd_bench_bounds(args) -> int:
    """The analysis' bounds against runs: each workload (every example this
    machine can run, by default) under paam, each critical chain's bound over
    its longest instance, and the goal judged."""
    named = bool(args.workloads)
    workloads = args.workloads or sorted(str(p) for p in Path(args.examples).glob("*.yaml"))
    texts = []
    for w in workloads:
        text, readable = common.workload_read_once(w)
        if not readable or not common.check_workload(w, text):
            return EXIT_BAD_INPUT
        texts.append(text)
    if not common.make_results_folder("rtaccel bench bounds", args.out):
        return EXIT_BAD_INPUT
    # A workload given through a pipe is run from a copy, as `rtaccel run` runs it.
    for i, text in enumerate(texts):
        if text is not None:
            workloads[i] = common.keep_workload("rtaccel bench bounds", text,
                                                Path(args.out) / f"workload-{i + 1}.yaml")
            if workloads[i] is None:
                return EXIT_RUNTIME
    try:
        status, result = runner.bounds_over_maxima(workloads, args.duration, args.out, progress=not args.quiet,
                                                   skip_unrunnable=not named)
    except runner.RunError as err:
        return common.fail("rtaccel bench bounds", err)
    if status:
        return status
    return common.print_result(result, args.json, runner.format_bounds_over_maxima)


def _backend_options(b) -> None:
    """The server's backend and device, for a benchmark that runs on either."""
    b.add_argument("--backend", choices=("cpu", "cuda"), default="cpu",
                   help="the server's backend (cpu: the last core is the device)")
    b.add_argument("--device", type=int, default=0, help="cuda: the GPU's number (0)")


def _add_request_overhead(bsub) -> None:
    """request-overhead: the server's time per request, from one client, from
    many at once, and from another node."""
    b = bsub.add_parser("request-overhead",
                        help="submit -> worker start -> kernel end -> client resumed, per request")
    b.add_argument("--wait", choices=("suspend", "spin"), default="suspend",
                   help="how the client waits for completion (suspend)")
    b.add_argument("--requests", type=common.positive_int, default=20000, help="requests measured (20000)")
    b.add_argument("--kernel-us", type=_kernel_us, default=100, metavar="US",
                   help="length of each busy kernel, subtracted from the round trip (100)")
    b.add_argument("--gap-us", type=_gap_us, default=0, metavar="US",
                   help="sleep between a request's end and the next, as periodic work does: the server's "
                        "worker stops polling and the cores may go idle (0: back to back)")
    b.add_argument("--idle", default=0, metavar="N",
                   type=common.whole_number(0, 4096, "idle registrations are 0..4096", " of registrations"),
                   help="N registrations of another client beside the measured one, in its bucket, that "
                        "submit nothing: what a device serving many callbacks has to look past (0)")
    b.add_argument("--no-fifo", action="store_true",
                   help="run server workers and client at SCHED_OTHER (no privilege needed)")
    b.add_argument("--remote", action="store_true",
                   help="also as a client on another node: the server in one network namespace with "
                        "its gateway on tcp, the client in another (root)")
    b.add_argument("--dds", action="store_true",
                   help="with --remote: also a Cyclone DDS request and reply between the namespaces")
    b.add_argument("--clients", type=common.counts(1, 256, "client counts"), metavar="N[,N...]",
                   help="clients at once, each a connection and registration of its own, e.g. 1,8,64; "
                        "each count a row beside the one-client baseline of the same run")
    b.add_argument("--buckets", type=common.counts(1, 8, "bucket counts"), metavar="B[,B...]",
                   help="the clients' request priorities spread over B buckets (1..8), e.g. 1,8")
    b.add_argument("--rounds", type=common.positive_int, default=4,
                   help="with --clients/--buckets: rounds that take every shape in turn, the requests "
                        "shared among them (4)")
    b.add_argument("--json", action="store_true", help="print JSON (keys p50_us, p99_us, max_us)")
    _backend_options(b)
    b.set_defaults(func=cmd_bench_request_overhead)


def _add_server_benchmarks(bsub) -> None:
    """The server's benchmarks: its overhead per request, its preemption, its
    admission of registrations and what co-runners cost its kernels."""
    _add_request_overhead(bsub)
    b = bsub.add_parser("preemption",
                        help="delay of a high-bucket request preempting a low-bucket kernel "
                             "(PAAM Table I)")
    b.add_argument("--iterations", type=common.positive_int, default=200, help="pairs per kernel (200)")
    b.add_argument("--no-fifo", action="store_true",
                   help="SCHED_OTHER workers: shows what is lost without real preemption")
    b.add_argument("--json", action="store_true", help="print JSON")
    _backend_options(b)
    b.set_defaults(func=cmd_bench_preemption)
    b = bsub.add_parser("registrations",
                        help="registration time as hundreds of callbacks are admitted (each chain's "
                             "admission analyses all), and the release of a client that leaves")
    b.add_argument("--callbacks", type=common.counts(1, accel.REGISTRATIONS_MOST, "callback counts"),
                   default=[8, 80, 400, 792], metavar="N[,N...]",
                   help="the registrations to report at, eight callbacks to a chain (8,80,400,792; at most "
                        f"{accel.REGISTRATIONS_MOST}: 99 chains, the default policy's priorities)")
    b.add_argument("--no-fifo", action="store_true", help="run server workers and client at SCHED_OTHER")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench_registrations)
    b = bsub.add_parser("corunners",
                        help="the server's kernels alone and beside a memory hog or an L1 loop on the device's "
                             "core and on the client's: what co-runners cost them here")
    b.add_argument("--rounds", type=common.positive_int, default=4,
                   help="rounds that take the configurations in turn (4)")
    b.add_argument("--iterations", type=common.positive_int, default=200,
                   help="requests per kernel, configuration and round (200)")
    b.add_argument("--size", type=_hog_size, default="64M", help="the hog's working set (64M)")
    b.add_argument("--no-fifo", action="store_true", help="run server workers and client at SCHED_OTHER")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench_corunners)


def _add_gang_benchmarks(bsub) -> None:
    """The gang lock's benchmarks, after RT-Gang: its preemption, a synthetic
    task set and a DNN's inference beside best-effort memory programs."""
    b = bsub.add_parser("gang-preemption",
                        help="release of a high gang until the lower gang is stopped on every core "
                             "(RT-Gang Table III), beside plain SCHED_FIFO and other mechanisms")
    b.add_argument("--rounds", type=common.positive_int, default=200, help="rounds per row (200)")
    b.add_argument("--threads", type=common.thread_counts, default="1,2,4,8",
                   help="lower gang sizes (1,2,4,8)")
    b.add_argument("--json", action="store_true",
                   help="print JSON (p50_us, p99_us, max_us; the same under baseline)")
    b.add_argument("--no-rt-throttling", action="store_true",
                   help="turn the kernel's real-time throttling off for the run (root): a lower "
                        "gang spinning on every core reaches it and stalls rounds for ~50 ms")
    b.set_defaults(func=cmd_bench_gang_preemption)

    b = bsub.add_parser("gang-synthetic",
                        help="two 2-thread periodic tasks over 3/4 of the LLC beside best-effort "
                             "memory programs, plain SCHED_FIFO against the gang lock (RT-Gang Fig. 5)")
    b.add_argument("--duration", type=common.seconds, default=10.0,
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
    b.add_argument("--duration", type=common.seconds, default=10.0, help="seconds per configuration (10)")
    b.add_argument("--threads", type=common.positive_int, help="inference threads (default: one per core)")
    b.add_argument("--out", default="out/gang-dnn", help="folder for the model, JSON and CDF (out/gang-dnn)")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench_gang_dnn)


def _add_regulator_benchmark(bsub) -> None:
    """The memory-bandwidth regulator's own figures."""
    b = bsub.add_parser("regulator",
                        help="the memory-bandwidth regulator: throttle onset, budget kept, period "
                             "accuracy, CPU overhead; cgroup freeze beside it; bandwidth lock cost")
    b.add_argument("--duration", type=common.seconds, default=5.0, help="seconds of regulation (5)")
    b.add_argument("--threshold", type=common.mbps, default=3000, help="threshold in force, MB/s (3000)")
    b.add_argument("--json", action="store_true",
                   help="print JSON (onset_p50_us, onset_p99_us, budget_ratio, ...)")
    b.set_defaults(func=cmd_bench_regulator)


def _add_bounds_benchmark(bsub) -> None:
    """The analysis against the runs: each example's bounds over its longest
    instances."""
    b = bsub.add_parser("bounds", help="each example under paam: every critical chain's bound over its "
                                       "longest instance, and whether any went over")
    b.add_argument("workloads", nargs="*", metavar="WORKLOAD", type=common.workload_file,
                   help="workload files (default: every example this machine can run; a named one is run "
                        "whatever it needs)")
    b.add_argument("--examples", default=str(EXAMPLES_DIR), help="folder of the example workloads")
    b.add_argument("--duration", type=common.seconds, default=30.0, help="seconds per workload (30)")
    b.add_argument("--out", default="out/bounds", help="result folder, one run per workload (out/bounds)")
    b.add_argument("--quiet", action="store_true", help="no progress lines")
    b.add_argument("--json", action="store_true",
                   help="print JSON (per workload and critical chain: bound_us, max_us, bound_over_max, "
                        "over_bound, unexplained; goal)")
    b.set_defaults(func=cmd_bench_bounds)


def _add_net_benchmarks(bsub) -> None:
    """The net layer's benchmarks: flow control's overhead, zero-copy sends
    and a high-priority flow under lower ones."""
    b = bsub.add_parser("net-overhead", help="the net layer's flow control against its raw transport, "
                                             "64 KiB to 32 MiB, one transfer at a time")
    b.add_argument("--transport", choices=_core.net_transports(), default="tcp", help="transport (tcp)")
    _transfer_arguments(b, "64K,128K,...,32M", "the flow-control link's chunk")
    b.add_argument("--dds", action="store_true",
                   help="the same transfers over Cyclone DDS beside them (dds_p50_us)")
    b.add_argument("--json", action="store_true",
                   help="print JSON (per size: raw_p50_us, flow_p50_us, overhead_us)")
    b.set_defaults(func=cmd_bench_net_overhead)
    b = bsub.add_parser("net-zerocopy", help="MSG_ZEROCOPY against plain sends on the raw tcp path, in "
                                             "the flow-control layer's chunks and window")
    _transfer_arguments(b, "64K,256K,1M,4M,32M", "bytes per send, as the layer's chunk")
    b.add_argument("--json", action="store_true",
                   help="print JSON (per size: send_p50_us, zerocopy_p50_us, completions_p50_us, copied_pct)")
    b.set_defaults(func=cmd_bench_net_zerocopy)
    b = bsub.add_parser("net-priority", help="a high-priority flow under three lower ones, raw and with "
                                             "flow control; equal-priority order (RDMA paper Fig. 12/13)")
    b.add_argument("--transport", choices=_core.net_transports(), default="tcp", help="transport (tcp)")
    b.add_argument("--rate", default="1gbit",
                   help="tcp: the rate of the veth link between two namespaces, as tc writes it, or "
                        "'none' for loopback (1gbit)")
    b.add_argument("--sizes", type=_sizes, help="transfer sizes (1M,2M,...,32M)")
    b.add_argument("--dds", action="store_true",
                   help="the same flows over Cyclone DDS on the same link beside them (dds_max_us)")
    b.add_argument("--json", action="store_true",
                   help="print JSON (per size: raw_max_us, flow_max_us, solo_us, chunk_us)")
    b.set_defaults(func=cmd_bench_net_priority)


def _add_bandwidth_lock_benchmarks(bsub) -> None:
    """The BWLOCK++ figures: TFS on a throttled core, and the bandwidth lock
    beside a memory hog."""
    b = bsub.add_parser("tfs", help="a memory-bound and a CPU-bound best-effort task on a throttled "
                                    "core under CFS and TFS rho=1, 3 (BWLOCK++ Fig. 5/6)")
    b.add_argument("--duration", type=common.seconds, default=5.0, help="seconds per scheduler (5)")
    b.add_argument("--threshold", type=common.mbps, default=3000, help="threshold in force, MB/s (3000)")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench_tfs)
    b = bsub.add_parser("bwlock", help="a critical task holding the bandwidth lock beside a memory "
                                       "hog: solo, co-run, regulated at each threshold (BWLOCK++ Fig. 7/8)")
    b.add_argument("--duration", type=common.seconds, default=5.0, help="seconds per configuration (5)")
    b.add_argument("--thresholds", default="4000,2000,1000,500,0",
                   help="thresholds in MB/s, comma-separated (4000,2000,1000,500,0)")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_bench_bwlock)


def register(sub) -> None:
    """Adds the family's commands to the parser's SUB: a group at a time, in
    the order `rtaccel bench --help` lists them."""
    p = sub.add_parser("bench", help="measure rtaccel-server on this machine")
    bsub = p.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")
    _add_server_benchmarks(bsub)
    _add_gang_benchmarks(bsub)
    _add_regulator_benchmark(bsub)
    _add_bounds_benchmark(bsub)
    _add_net_benchmarks(bsub)
    _add_bandwidth_lock_benchmarks(bsub)
