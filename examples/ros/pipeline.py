#!/usr/bin/env python3
"""A ROS 2 pipeline written as ROS 2's Python tutorials write nodes (a
publisher on a timer, subscribers that pass messages on), run under
rtaccel's executor. Against the tutorial's program, what changes is the
line that makes the executor, and the lines that give the chains their
priorities; `--executor rclpy` runs it under rclpy's own instead.

A camera node publishes a frame every 100 ms, a detector passes it on, a
planner acts on it: the critical chain. A logger node beside it, on a 10 ms
timer, does more work than the executor has time for: without priorities,
the critical chain waits behind it.

usage: python examples/ros/pipeline.py [--executor rtaccel|rclpy] [--seconds 5]
"""

import argparse
import time

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.timer import TimerInfo
from std_msgs.msg import String

import rtaccel.ros


def work(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Camera(Node):
    def __init__(self):
        super().__init__("camera")
        self.publisher_ = self.create_publisher(String, "frames", 10)
        self.timer = self.create_timer(0.1, self.timer_callback)

    def timer_callback(self, info: TimerInfo):
        work(0.002)
        self.publisher_.publish(String(data=str(info.expected_call_time.nanoseconds)))


class Detector(Node):
    def __init__(self):
        super().__init__("detector")
        self.publisher_ = self.create_publisher(String, "objects", 10)
        self.subscription = self.create_subscription(String, "frames", self.listener_callback, 10)

    def listener_callback(self, msg):
        work(0.002)
        self.publisher_.publish(msg)


class Planner(Node):
    def __init__(self):
        super().__init__("planner")
        self.latencies_ms = []
        self.subscription = self.create_subscription(String, "objects", self.listener_callback, 10)

    def listener_callback(self, msg):
        work(0.002)
        self.latencies_ms.append((time.time_ns() - int(msg.data)) / 1e6)


class Logger(Node):
    def __init__(self):
        super().__init__("logger")
        self.timer = self.create_timer(0.01, self.timer_callback)

    def timer_callback(self):
        work(0.012)


def main():
    parser = argparse.ArgumentParser(description="a ROS 2 pipeline under rtaccel's executor")
    parser.add_argument("--executor", choices=("rtaccel", "rclpy"), default="rtaccel")
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()

    rclpy.init()
    logger, camera, detector, planner = Logger(), Camera(), Detector(), Planner()
    if args.executor == "rtaccel":
        executor = rtaccel.ros.Executor(policy="picas")  # the tutorial's: SingleThreadedExecutor()
        executor.add_chain("perception", [camera.timer, detector.subscription, planner.subscription],
                           priority=10, deadline_ms=100)
    else:
        executor = SingleThreadedExecutor()
    for node in (logger, camera, detector, planner):
        executor.add_node(node)

    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.1)

    ordered = sorted(planner.latencies_ms)
    if ordered:
        print(f"{args.executor}: perception chain, {len(ordered)} frames: "
              f"p50 {ordered[len(ordered) // 2]:.1f} ms, max {ordered[-1]:.1f} ms")
    else:
        print(f"{args.executor}: no frame reached the planner in {args.seconds:g} s")
    if args.executor == "rtaccel":
        for row in executor.latencies():
            if row["count"]:
                    print(f"  measured by the executor: {row['chain']} p99 {row['p99_us'] / 1000:.1f} ms, "
                      f"{row['deadline_misses']} deadline misses")
    executor.shutdown()
    for node in (logger, camera, detector, planner):
        node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    main()
