#!/usr/bin/env python3
"""rtaccel.ros's executor against rclpy's own, on one ROS 2 graph, in one run.

The graph, made anew for each executor in a ROS 2 context and domain of
its own:
- a critical chain: a timer every 100 ms, then two subscriptions, each
  callback 2 ms of Python work, each passing the message on;
- a best-effort chain beside it that overloads the executor: a timer every
  10 ms, then two subscriptions of 6 ms of work each.
The chains measure themselves, the same way under every executor: the
timer's callback puts its due time (rclpy's TimerInfo) in the message, the
last callback takes it from its end. The critical chain's p50/p99/max are
printed per executor, and the ratio of each p99 to that of rclpy's
SingleThreadedExecutor, the ROS 2 default; rtaccel.ros's own measurement of
the chain (source timestamps) is printed beside its figure.

`--dispatch` measures what an executor costs per callback beyond the
callback: one timer always due, whose callback does nothing, spun for the
same time under each executor: wall time per callback.

usage: .venv/bin/python bench/ros_executors.py [--seconds 10] [--dispatch] [--json]
"""

import argparse
import itertools
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

import rclpy  # noqa: E402
from rclpy.executors import MultiThreadedExecutor, SingleThreadedExecutor  # noqa: E402
from rclpy.experimental import EventsExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.timer import TimerInfo  # noqa: E402
from std_msgs.msg import String  # noqa: E402

from rtaccel import ros  # noqa: E402
from rtaccel._core import percentile  # noqa: E402

EXECUTORS = {
    "rclpy SingleThreadedExecutor": lambda context: SingleThreadedExecutor(context=context),
    "rclpy MultiThreadedExecutor": lambda context: MultiThreadedExecutor(context=context),
    "rclpy EventsExecutor": lambda context: EventsExecutor(context=context),
    "rtaccel.ros picas": lambda context: ros.Executor("picas", context=context),
    "rtaccel.ros ros2": lambda context: ros.Executor("ros2", context=context),
}
BASELINE = "rclpy SingleThreadedExecutor"
_DOMAINS = itertools.count(os.getpid() % 100 + 1)


def busy(seconds: float) -> None:
    """Python work, holding the interpreter as a callback's computation does."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Chain:
    """A timer and two subscriptions on NODE, each callback WORK_S of work,
    the chain's latencies (ns) in self.latencies."""

    def __init__(self, node: Node, name: str, period_s: float, work_s: float):
        self.latencies = []
        first = node.create_publisher(String, f"{name}/a", 10)
        second = node.create_publisher(String, f"{name}/b", 10)

        def release(info: TimerInfo):
            busy(work_s)
            first.publish(String(data=str(info.expected_call_time.nanoseconds)))

        def middle(message):
            busy(work_s)
            second.publish(message)

        def last(message):
            busy(work_s)
            self.latencies.append(time.time_ns() - int(message.data))

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


def chains_under(name: str, seconds: float) -> dict:
    def run(context):
        node = Node("bench", context=context)
        # the best-effort chain first: rclpy's order serves it first
        best_effort = Chain(node, "best_effort", 0.010, 0.006)
        critical = Chain(node, "critical", 0.100, 0.002)
        executor = EXECUTORS[name](context)
        if isinstance(executor, ros.Executor):
            executor.add_chain("critical", critical.callbacks(), priority=10, deadline_ms=100)
            executor.add_chain("best_effort", best_effort.callbacks(), priority=1)
        executor.add_node(node)
        spin_for(executor, seconds)
        row = {"executor": name, "critical": percentiles(critical.latencies),
               "best_effort": percentiles(best_effort.latencies)}
        if isinstance(executor, ros.Executor):
            row["measured_by_executor"] = {r["chain"]: r for r in executor.latencies()}
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
        spin_for(executor, seconds)
        elapsed = time.perf_counter() - start
        executor.shutdown()
        node.destroy_node()
        return {"executor": name, "callbacks": calls[0],
                "us_per_callback": elapsed * 1e6 / calls[0] if calls[0] else None}
    return in_context(run)


def ratio(value, baseline):
    return None if value is None or not baseline else value / baseline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="each executor's run (10)")
    parser.add_argument("--dispatch", action="store_true", help="also the cost of a callback's dispatch")
    parser.add_argument("--json", action="store_true", help="the results as JSON")
    args = parser.parse_args()
    if not args.seconds > 0:
        parser.error("--seconds must be positive")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    results = {"seconds": args.seconds, "chains": [chains_under(name, args.seconds) for name in EXECUTORS]}
    base = next(r for r in results["chains"] if r["executor"] == BASELINE)["critical"]["p99_us"]
    for row in results["chains"]:
        row["critical_p99_vs_default"] = ratio(row["critical"]["p99_us"], base)
    if args.dispatch:
        results["dispatch"] = [dispatch_under(name, min(args.seconds, 3.0)) for name in EXECUTORS]
        base = next(r for r in results["dispatch"] if r["executor"] == BASELINE)["us_per_callback"]
        for row in results["dispatch"]:
            row["vs_default"] = ratio(row["us_per_callback"], base)
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    print(f"critical chain (100 ms, 3 x 2 ms) beside an overloading best-effort chain, {args.seconds:g} s each")
    print(f"{'executor':30} {'count':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'p99/default':>12}")
    for row in results["chains"]:
        c = row["critical"]
        fmt = lambda us: "-" if us is None else f"{us / 1000:.1f}"  # noqa: E731
        vs = "-" if row["critical_p99_vs_default"] is None else f"{row['critical_p99_vs_default']:.2f}x"
        print(f"{row['executor']:30} {c['count']:6} {fmt(c['p50_us']):>8} {fmt(c['p99_us']):>8} "
              f"{fmt(c['max_us']):>8} {vs:>12}")
    for row in results.get("dispatch", []):
        per = "-" if row["us_per_callback"] is None else f"{row['us_per_callback']:.1f} us"
        vs = "-" if row["vs_default"] is None else f"{row['vs_default']:.2f}x"
        print(f"dispatch, {row['executor']:30} {per:>10} per callback ({vs} the default's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
