#!/usr/bin/env python3
"""rtaccel.ros's executor against rclpy's own, on one ROS 2 graph, in one run.

The graph, made anew for each executor in a ROS 2 context and domain of
its own:
- a critical chain: a timer every 100 ms, then two subscriptions, each
  callback 2 ms of Python work, each passing the message on;
- a best-effort chain beside it that overloads the executor: a timer every
  10 ms, then two subscriptions of 6 ms of work each.
rtaccel.ros's picas runs twice: as a program would first (one line
changed), then pinned to the first core at SCHED_FIFO with each callback's
WCET declared (its work and 1 ms), where the analysis gives the critical
chain a bound; each callback's longest run is checked against what it
declared. The best-effort chain overloads the executor, so that the
kernel's real-time throttling (950 ms of every second for SCHED_FIFO
threads, by default) would stop the pinned one for 50 ms a second: the
bound's premise fails and none is given, unless --no-rt-throttling turns
the throttling off for the run (root's; put back after). The chains measure themselves, the same way under every executor: the
timer's callback puts its due time (rclpy's TimerInfo) in the message, the
last callback takes it from its end. The critical chain's p50/p99/max are
printed per executor, and the ratio of each p99 to that of rclpy's
SingleThreadedExecutor, the ROS 2 default; rtaccel.ros's own measurement of
the chain (source timestamps) is printed beside its figure.

`--dispatch` measures what an executor costs per callback beyond the
callback: one timer always due, whose callback does nothing, spun for the
same time under each executor: wall time per callback.

`--gil` measures instead what Python's interpreter lock costs the critical
chain: the chain alone under rtaccel.ros's picas executor (its thread at
SCHED_FIFO), then the same beside a Python thread of the same process
doing CPU-bound work (holding the lock but when the interpreter makes it
let go), on another core at the default switch interval and at smaller ones
(sys.setswitchinterval), and on the executor's core. Here each callback's
2 ms is a fixed amount of computation (2 ms of it alone), which the other
thread's turns stretch. What the thread adds to the chain's p50, p99 and
maximum is set against the times the lock passed back to the executor's
thread in an instance (its handoffs) and the switch interval.

usage: .venv/bin/python bench/ros_executors.py [--seconds 10] [--dispatch | --gil] [--no-rt-throttling] [--json]
"""

import argparse
import contextlib
import itertools
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import rclpy  # noqa: E402
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor  # noqa: E402
from rclpy.experimental import EventsExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.timer import TimerInfo  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from rtaccel import realtime, ros  # noqa: E402
from rtaccel._core import percentile  # noqa: E402

EXECUTORS = {
    "rclpy SingleThreadedExecutor": lambda context: SingleThreadedExecutor(context=context),
    "rclpy MultiThreadedExecutor": lambda context: MultiThreadedExecutor(context=context),
    "rclpy EventsExecutor": lambda context: EventsExecutor(context=context),
    "rtaccel.ros picas": lambda context: ros.Executor("picas", context=context),
    "rtaccel.ros picas, pinned at SCHED_FIFO": lambda context: ros.Executor(
        "picas", context=context, core=min(os.sched_getaffinity(0)), fifo_priority=FIFO_PRIORITY),
    "rtaccel.ros ros2": lambda context: ros.Executor("ros2", context=context),
}
BASELINE = "rclpy SingleThreadedExecutor"
# --gil: the runs, (where the busy thread computes, the switch interval in
# ms): alone, then on the other core (the threads take turns with the lock
# at every switch interval) at the interpreter's own interval (None: 5 ms
# unless the program set it) and smaller ones, then on the executor's core
# (its thread at SCHED_FIFO keeps the core, and so the lock, while it
# computes).
GIL_RUNS = ((None, None), ("another core", None), ("another core", 1.0), ("another core", 0.2),
            ("the executor's core", None))
# A pause this long in the busy thread's loop (about 1 µs a round) is a time
# it did not hold the interpreter lock: the executor's thread had it.
LOCK_LOST_NS = 10_000
# --gil: the executor's thread's SCHED_FIFO priority
GIL_FIFO_PRIORITY = 80
_DOMAINS = itertools.count(os.getpid() % 100 + 1)
# The pinned executor's SCHED_FIFO priority, and what each callback declares
# beyond its work as its WCET.
FIFO_PRIORITY = 80
WCET_MARGIN_S = 0.001


def busy(seconds: float) -> None:
    """Python work, holding the interpreter as a callback's computation does."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Computation:
    """Python work of a fixed size, what takes SECONDS alone: beside another
    thread that computes, it takes longer (busy() does not)."""

    def __init__(self, trials: int = 50, rounds: int = 20000):
        fastest = float("inf")
        for _ in range(trials):  # the fastest trial: the one the VM's other load left alone
            start = time.perf_counter()
            self.compute_rounds(rounds)
            fastest = min(fastest, time.perf_counter() - start)
        self.per_second = rounds / fastest

    @staticmethod
    def compute_rounds(rounds: int) -> int:
        x = 1
        for _ in range(rounds):
            x = (x * 31 + 7) % 1000003
        return x

    def __call__(self, seconds: float) -> None:
        self.compute_rounds(int(seconds * self.per_second))


class Chain:
    """A timer and two subscriptions on NODE, each callback WORK_S of work
    (WORK: busy, or a Computation), the chain's latencies (ns) in
    self.latencies."""

    def __init__(self, node: Node, name: str, period_s: float, work_s: float, work=busy):
        self.name, self.work_s = name, work_s
        self.latencies = []
        self.windows = []  # (release, end) of each instance, time.time_ns()
        first = node.create_publisher(String, f"{name}/a", 10)
        second = node.create_publisher(String, f"{name}/b", 10)

        def release(info: TimerInfo):
            work(work_s)
            first.publish(String(data=str(info.expected_call_time.nanoseconds)))

        def middle(message):
            work(work_s)
            second.publish(message)

        def last(message):
            work(work_s)
            end = time.time_ns()
            self.latencies.append(end - int(message.data))
            self.windows.append((int(message.data), end))

        self.timer = node.create_timer(period_s, release)
        self.subscriptions = [node.create_subscription(String, f"{name}/a", middle, 10),
                              node.create_subscription(String, f"{name}/b", last, 10)]

    def callbacks(self):
        return [self.timer, *self.subscriptions]


def percentiles(ns: list) -> dict:
    if not ns:
        return {"count": 0, "p50_us": None, "p99_us": None, "max_us": None}
    return {"count": len(ns), "p50_us": percentile(ns, 0.5) / 1000.0, "p99_us": percentile(ns, 0.99) / 1000.0,
            "max_us": max(ns) / 1000.0}


def spin_for(executor, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)


def in_context(run):
    """RUN(context) in a ROS 2 context and domain of its own."""
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=next(_DOMAINS) % 100 + 1)
    try:
        return run(context)
    finally:
        rclpy.shutdown(context=context)


def bare_node(context) -> Node:
    """The bench's node, without the parameter and type description services
    rclpy gives every node: its callbacks are the chains' alone, as the
    analysis needs (docs/ros.md)."""
    return Node("bench", context=context, start_parameter_services=False,
                parameter_overrides=[Parameter("start_type_description_service", value=False)])


def declare(executor, chains) -> None:
    """CHAINS on rtaccel.ros's EXECUTOR: each callback's work and
    WCET_MARGIN_S as its WCET."""
    for priority, chain in zip((10, 1), chains):
        executor.add_chain(chain.name, chain.callbacks(), priority=priority,
                           deadline_ms=100 if priority == 10 else None)
        for callback in chain.callbacks():
            executor.set_work(callback, cpu_wcet_ms=(chain.work_s + WCET_MARGIN_S) * 1000)


def over_their_wcet(executor, chains) -> list:
    """The callbacks that ran longer than the WCET they declared (the
    executor's timeline): the analysis' premise broken, how often and by how
    much."""
    declared = {f"{c.name}/{i}": c.work_s + WCET_MARGIN_S for c in chains for i in range(3)}
    names = {ros.label(cb): f"{c.name}/{i}" for c in chains for i, cb in enumerate(c.callbacks())}
    runs = {}
    for event in executor.trace():
        if event["ph"] == "X" and event["name"] in names:
            runs.setdefault(names[event["name"]], []).append(event["dur"] / 1e6)
    over = []
    for key, durations in sorted(runs.items()):
        longer = [d for d in durations if d > declared[key]]
        if longer:
            over.append({"callback": key, "runs": len(durations), "over": len(longer),
                         "longest_ms": max(longer) * 1000, "declared_ms": declared[key] * 1000})
    return over


def spin_keeping_the_thread(executor, seconds: float) -> None:
    """spin_for, the bench's thread given back its core and policy after (a
    pinned executor takes them): the next executor starts where this one did."""
    affinity, policy, param = os.sched_getaffinity(0), os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        spin_for(executor, seconds)
    finally:
        os.sched_setscheduler(0, policy, param)
        os.sched_setaffinity(0, affinity)


def chains_under(name: str, seconds: float) -> dict:
    def run(context):
        node = bare_node(context)
        # the best-effort chain first: rclpy's order serves it first
        best_effort = Chain(node, "best_effort", 0.010, 0.006)
        critical = Chain(node, "critical", 0.100, 0.002)
        executor = EXECUTORS[name](context)
        if isinstance(executor, ros.Executor):
            declare(executor, (critical, best_effort))
        executor.add_node(node)
        spin_keeping_the_thread(executor, seconds)
        row = {"executor": name, "critical": percentiles(critical.latencies),
               "best_effort": percentiles(best_effort.latencies)}
        if isinstance(executor, ros.Executor):
            row["measured_by_executor"] = {r["chain"]: r for r in executor.latencies()}
            row["bound_us"] = row["measured_by_executor"]["critical"]["bound_us"]
            row["why_unbounded"] = row["measured_by_executor"]["critical"]["why_unbounded"]
            row["over_their_wcet"] = over_their_wcet(executor, (critical, best_effort))
        executor.shutdown()
        node.destroy_node()
        return row
    return in_context(run)


def dispatch_under(name: str, seconds: float) -> dict:
    def run(context):
        node = Node("bench", context=context)
        calls = [0]

        def nothing():
            calls[0] += 1

        node.create_timer(0.0, nothing)
        executor = EXECUTORS[name](context)
        executor.add_node(node)
        start = time.perf_counter()
        spin_keeping_the_thread(executor, seconds)
        elapsed = time.perf_counter() - start
        executor.shutdown()
        node.destroy_node()
        return {"executor": name, "callbacks": calls[0],
                "us_per_callback": elapsed * 1e6 / calls[0] if calls[0] else None}
    return in_context(run)


def python_work(stop: threading.Event, lost: list, core: int | None) -> None:
    """CPU-bound Python on CORE, as a second thread of a ROS 2 program
    computes: it lets go of the interpreter lock only when the interpreter
    asks it to. LOST gets the (start, end) of each time it was without it."""
    if core is not None:
        os.sched_setaffinity(0, {core})  # 0: this thread
    x, last = 1, time.time_ns()
    while not stop.is_set():
        for _ in range(10):
            x = (x * 31 + 7) % 1000003
        now = time.time_ns()
        if now - last > LOCK_LOST_NS:
            lost.append((last, now))
        last = now


def handoffs(windows: list, lost: list) -> list:
    """Per instance (its window), the times the busy thread was without the
    lock within it: each a time the executor's thread took it back, having
    waited for it (and those the OS gave the busy thread's core to another:
    they count too)."""
    return [sum(1 for start, end in lost if release <= end and start <= finish) for release, finish in windows]


def critical_beside(seconds: float, where: str | None, switch_interval_ms: float | None,
                    work: Computation) -> dict:
    """The critical chain under picas, its thread at SCHED_FIFO on the
    first core (where allowed), as rtaccel runs executors: alone (WHERE
    None), or beside a busy Python thread on the other core or on the
    executor's, at SWITCH_INTERVAL_MS. Its latency, and per instance its
    latency and handoffs."""
    def run(context):
        node = Node("bench", context=context)
        critical = Chain(node, "critical", 0.100, 0.002, work)
        cores = sorted(os.sched_getaffinity(0))
        executor = ros.Executor("picas", context=context, core=cores[0], fifo_priority=GIL_FIFO_PRIORITY)
        executor.add_chain("critical", critical.callbacks(), priority=10, deadline_ms=100)
        executor.add_node(node)
        stop, interval, lost = threading.Event(), sys.getswitchinterval(), []
        core = cores[0] if where == "the executor's core" or len(cores) == 1 else cores[-1]
        thread = threading.Thread(target=python_work, args=(stop, lost, core), daemon=True)
        try:
            if switch_interval_ms is not None:
                sys.setswitchinterval(switch_interval_ms / 1000)
            spin_in_a_thread(executor, seconds, thread.start if where else lambda: None)
        finally:
            stop.set()
            if where:
                thread.join()
            sys.setswitchinterval(interval)
        executor.shutdown()
        node.destroy_node()
        return {"busy_thread": where, "realtime": executor.realtime,
                "switch_interval_ms": switch_interval_ms if switch_interval_ms is not None else interval * 1000,
                "critical": percentiles(critical.latencies),
                "instances": list(zip(critical.latencies, handoffs(critical.windows, lost)))}
    return in_context(run)


def spin_in_a_thread(executor, seconds: float, then) -> None:
    """spin_for in a thread of its own (the executor takes its thread's core
    and policy; the bench's main thread keeps its own), calling THEN once
    the executor has taken it: the first spin_once reads the process's
    real-time rights from many small files, which beside a busy thread
    takes a switch interval each."""
    taken = threading.Event()

    def spin():
        executor.spin_once(timeout_sec=0)
        taken.set()
        spin_for(executor, seconds)

    thread = threading.Thread(target=spin)
    thread.start()
    taken.wait()
    then()
    thread.join()


def gil_runs(seconds: float) -> list:
    """The critical chain alone, then beside the busy thread as GIL_RUNS
    say: what the thread added to its p50, p99 and maximum (ms), the
    handoffs per instance, and what each cost: an instance's latency over
    the p50 alone, per handoff."""
    work = Computation()  # measured alone, before any thread is started
    rows = [critical_beside(seconds, where, ms, work) for where, ms in GIL_RUNS]
    alone = rows[0]["critical"]
    for row in rows:
        c = row["critical"]
        for stat in ("p50", "p99", "max"):
            us, alone_us = c[f"{stat}_us"], alone[f"{stat}_us"]
            row[f"added_{stat}_ms"] = None if us is None or alone_us is None else (us - alone_us) / 1000
        instances = row.pop("instances")
        passed = [n for _, n in instances]
        per = [(ns / 1000 - alone["p50_us"]) / 1000 / n for ns, n in instances if n and alone["p50_us"] is not None]
        row["handoffs"] = {"p50": percentile(passed, 0.5) if passed else None, "max": max(passed, default=None)}
        row["ms_per_handoff"] = {"p50": percentile(per, 0.5) if per else None, "max": max(per, default=None)}
    return rows


def print_gil(results: dict) -> None:
    print(f"critical chain (100 ms, 3 x 2 ms of computation) under picas at SCHED_FIFO, beside a busy "
          f"Python thread or not, {results['seconds']:g} s each")
    print(f"{'run':48} {'count':>5} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'+p50':>6} {'+max':>6} "
          f"{'handoffs p50/max':>17} {'ms per handoff p50/max':>23}")
    fmt = lambda value, scale=1, digits=1: "-" if value is None else f"{value / scale:.{digits}f}"  # noqa: E731
    for row in results["gil"]:
        c, h, per = row["critical"], row["handoffs"], row["ms_per_handoff"]
        run = (f"busy thread on {row['busy_thread']}, interval {row['switch_interval_ms']:g} ms"
               if row["busy_thread"] else "alone")
        print(f"{run:48} {c['count']:5} {fmt(c['p50_us'], 1000):>7} {fmt(c['p99_us'], 1000):>7} "
              f"{fmt(c['max_us'], 1000):>7} {fmt(row['added_p50_ms']):>6} {fmt(row['added_max_ms']):>6} "
              f"{fmt(h['p50'], digits=0) + '/' + fmt(h['max'], digits=0):>17} "
              f"{fmt(per['p50'], digits=2) + '/' + fmt(per['max'], digits=2):>23}")
    if not all(row["realtime"] for row in results["gil"]):
        print("(the executor's thread ran without SCHED_FIFO: the VM's other load is in these figures)")


def ratio(value, baseline):
    return None if value is None or not baseline else value / baseline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="each executor's run (10)")
    parser.add_argument("--dispatch", action="store_true", help="also the cost of a callback's dispatch")
    parser.add_argument("--gil", action="store_true",
                        help="instead: the critical chain beside a busy Python thread, or not")
    parser.add_argument("--no-rt-throttling", action="store_true",
                        help="the kernel's real-time throttling off for the run (root)")
    parser.add_argument("--json", action="store_true", help="the results as JSON")
    args = parser.parse_args()
    if not args.seconds > 0:
        parser.error("--seconds must be positive")
    if args.gil and args.dispatch:
        parser.error("--gil runs the interpreter lock's runs alone: no --dispatch with it")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    if args.gil:
        results = {"seconds": args.seconds, "gil": gil_runs(args.seconds)}
        if args.json:
            print(json.dumps(results, indent=1))
        else:
            print_gil(results)
        return 0
    with contextlib.ExitStack() as stack:
        if args.no_rt_throttling:
            try:
                stack.enter_context(realtime.no_rt_throttling("ros_executors.py"))
            except OSError as err:
                parser.error(err.strerror)
        results = {"seconds": args.seconds, "rt_throttling": not args.no_rt_throttling,
                   "chains": [chains_under(name, args.seconds) for name in EXECUTORS]}
        if args.dispatch:
            results["dispatch"] = [dispatch_under(name, min(args.seconds, 3.0)) for name in EXECUTORS]
    base = next(r for r in results["chains"] if r["executor"] == BASELINE)["critical"]["p99_us"]
    for row in results["chains"]:
        row["critical_p99_vs_default"] = ratio(row["critical"]["p99_us"], base)
    if args.dispatch:
        base = next(r for r in results["dispatch"] if r["executor"] == BASELINE)["us_per_callback"]
        for row in results["dispatch"]:
            row["vs_default"] = ratio(row["us_per_callback"], base)
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print(f"critical chain (100 ms, 3 x 2 ms) beside an overloading best-effort chain, {args.seconds:g} s each")
    print(f"{'executor':40} {'count':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'p99/default':>12} "
          f"{'bound ms':>9}")
    for row in results["chains"]:
        c = row["critical"]
        fmt = lambda us: "-" if us is None else f"{us / 1000:.1f}"  # noqa: E731
        vs = "-" if row["critical_p99_vs_default"] is None else f"{row['critical_p99_vs_default']:.2f}x"
        print(f"{row['executor']:40} {c['count']:6} {fmt(c['p50_us']):>8} {fmt(c['p99_us']):>8} "
              f"{fmt(c['max_us']):>8} {vs:>12} {fmt(row.get('bound_us')):>9}")
        for over in row.get("over_their_wcet", ()):
            print(f"  {over['callback']}: {over['over']} of {over['runs']} runs over its declared "
                  f"{over['declared_ms']:.2f} ms, the longest {over['longest_ms']:.2f} ms")
    for row in results.get("dispatch", []):
        per = "-" if row["us_per_callback"] is None else f"{row['us_per_callback']:.1f} us"
        vs = "-" if row["vs_default"] is None else f"{row['vs_default']:.2f}x"
        print(f"dispatch, {row['executor']:30} {per:>10} per callback ({vs} the default's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
