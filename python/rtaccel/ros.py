"""rtaccel's executor for rclpy: a ROS 2 program's callbacks run in the
order of its chains' priorities, and each chain's latency is measured.

A program written to ROS 2's tutorials changes the line that makes its
executor, and says which callbacks form which chain:

    executor = rtaccel.ros.Executor(policy="picas")
    executor.add_node(node)
    executor.add_chain("control", [node.timer, node.filter_sub, node.actuate_sub],
                       priority=10, deadline_ms=100)
    executor.spin()

The words are those of rtaccel's workload files (docs/workload.md):

- A **chain** is a timer or a subscription, then the subscriptions that
  each take what the one before published, in that order.
- A **priority** is an integer, higher is more urgent. A callback's
  priority is the one given to it (set_priority), else the one given to its
  callback group, else that of the most critical chain holding it. A
  callback with none of these runs after every callback that has one.
- **Policies**: `ros2` is rclpy's own SingleThreadedExecutor's order: at a
  polling point, what is ready then runs in rclpy's order (node by node:
  timers, subscriptions, guard conditions, clients, services) before the
  executor looks again. `picas` looks again before every callback and runs
  the ready one of highest priority first; among equals, rclpy's order.

Chains are measured without a change to the messages: a subscription's
message carries the time it was published (its source timestamp), and the
executor knows which callback of the chain's previous step was running
then, so which instance of the chain the message belongs to. An instance
starts at its timer's due time (or at its first message's publication) and
ends when its last callback returns; latencies() gives p50/p99/max per
chain, trace() the callbacks as Perfetto trace events. A message published
outside this executor's callbacks starts no instance and ends none: it is
counted as unattributed.

One executor runs one callback at a time, in the thread that spins it.
Python's interpreter lock is shared by every thread of the process: a
thread of the same program that holds it (another executor, a ROS 2
middleware thread running Python, a Python thread doing work) delays a
critical callback by as long as it holds it, up to the interpreter's
switch interval (sys.getswitchinterval(), 5 ms by default) at a time,
whatever the priorities. A bound for a chain run here holds only with that
blocking added, once per callback of higher priority and once more.
"""

from __future__ import annotations

import collections
import os
import pathlib
import threading
import time
from dataclasses import dataclass, field

from rtaccel import realtime, timeline
from rtaccel._core import percentile

try:
    from rclpy.callback_groups import CallbackGroup
    from rclpy.client import Client
    from rclpy.executors import (ConditionReachedException, Executor as _RclpyExecutor,
                                 ExternalShutdownException, ShutdownException, TimeoutException,
                                 await_or_execute)
    from rclpy.exceptions import InvalidHandle
    from rclpy.service import Service
    from rclpy.subscription import Subscription
    from rclpy.timer import Timer
except ImportError as err:  # pragma: no cover: said to a user without ROS 2
    raise ImportError("rtaccel.ros needs rclpy: pip install ros-kilted-rclpy ros-kilted-rmw-fastrtps-cpp "
                      "(make setup installs them into the checkout's .venv)") from err

POLICIES = ("ros2", "picas")
ENTITIES = (Timer, Subscription, Service, Client)
# Below every priority a user can give: a callback no chain holds.
UNRANKED = float("-inf")
# The executions of each chain step kept to find a message's instance by:
# a message is taken within a few instances of its publication.
KEPT_EXECUTIONS = 16


@dataclass
class Chain:
    name: str
    callbacks: tuple
    priority: int
    deadline_ns: int | None
    latencies_ns: list = field(default_factory=list)
    deadline_misses: int = 0
    unattributed: int = 0
    # per step: (start_ns, end_ns, release_ns) of its latest executions
    executions: list = field(default_factory=list)


def label(entity) -> str:
    """How a callback is named in errors and on the timeline."""
    try:
        return _label(entity)
    except InvalidHandle:  # destroyed: its period or topic is gone with it
        return type(entity).__name__.lower()


def _label(entity) -> str:
    if isinstance(entity, Timer):
        return f"timer of {entity.timer_period_ns / 1e6:g} ms"
    if isinstance(entity, Subscription):
        return f"subscription to {entity.topic_name}"
    if isinstance(entity, Service):
        return f"service {entity.srv_name}"
    if isinstance(entity, Client):
        return f"client of {entity.srv_name}"
    return type(entity).__name__


class Executor(_RclpyExecutor):
    """An rclpy executor that runs callbacks by priority (policy `picas`)
    or in rclpy's own order (policy `ros2`), measuring its chains."""

    def __init__(self, policy: str = "picas", *, context=None, core: int | None = None,
                 fifo_priority: int | None = None):
        self.policy = policy
        self.core, self.fifo_priority = core, fifo_priority
        self.realtime = None      # once spinning: whether its thread got fifo_priority
        self._given = {}          # id(callback or group) -> (it, priority)
        self._chains = {}         # name -> Chain
        self._steps = {}          # id(callback) -> [(chain, step)]
        self._ready = []          # (handler, entity, node, priority) found ready, in rclpy's order
        self._pending = set()     # id() of the handlers in _ready
        self._taken = {}          # id(subscription) -> its message's source timestamp
        self._events = []         # (label, start_ns, end_ns, thread, chain names)
        self._spinner = None
        # rclpy's __del__ reads it, also of an executor its __init__ never
        # reached or left half-way (a context not initialised)
        self._sigint_gc = None
        if policy not in POLICIES:
            raise ValueError(f"policy {policy!r}: the policies are {', '.join(POLICIES)}")
        if core is not None and core not in os.sched_getaffinity(0):
            raise ValueError(f"core {core!r}: this process may run on cores "
                             f"{sorted(os.sched_getaffinity(0))} only")
        if fifo_priority is not None and (isinstance(fifo_priority, bool) or fifo_priority not in range(1, 100)):
            raise ValueError(f"fifo_priority {fifo_priority!r}: SCHED_FIFO priorities are 1..99")
        super().__init__(context=context)

    # ---- what the user declares ------------------------------------------------

    def set_priority(self, target, priority: int) -> None:
        """Gives a callback (its timer, subscription, service or client) or a
        callback group a priority, over that of the chains holding it."""
        if not isinstance(target, (*ENTITIES, CallbackGroup)):
            raise TypeError(f"set_priority: {target!r} is not a timer, subscription, service, client "
                            "or callback group")
        self._check_priority("set_priority", priority)
        if not isinstance(target, CallbackGroup):
            self._check_alive("set_priority", target)
        self._given[id(target)] = (target, priority)

    def add_chain(self, name: str, callbacks, *, priority: int, deadline_ms: float | None = None) -> None:
        """Declares a chain: CALLBACKS in order, a timer or a subscription
        first, then subscriptions, each taking what the one before publishes.
        Chains' priorities are distinct."""
        where = f"chain {name!r}"
        if not isinstance(name, str) or not name or name in self._chains:
            raise ValueError(f"{where}: a chain needs a name of its own")
        self._check_priority(where, priority)
        if any(chain.priority == priority for chain in self._chains.values()):
            raise ValueError(f"{where}: priority {priority} is another chain's; chains' priorities are distinct")
        callbacks = tuple(callbacks)
        if not callbacks:
            raise ValueError(f"{where}: no callbacks")
        if deadline_ms is not None and not deadline_ms > 0:
            raise ValueError(f"{where}: deadline_ms must be positive, not {deadline_ms!r}")
        for step, entity in enumerate(callbacks):
            self._check_step(where, step, entity, callbacks)
        chain = Chain(name, callbacks, priority, None if deadline_ms is None else int(deadline_ms * 1e6),
                      executions=[collections.deque(maxlen=KEPT_EXECUTIONS) for _ in callbacks])
        self._chains[name] = chain
        for step, entity in enumerate(callbacks):
            self._steps.setdefault(id(entity), []).append((chain, step))

    def _check_priority(self, where: str, priority) -> None:
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise TypeError(f"{where}: a priority is an integer, not {priority!r}")

    def _check_step(self, where: str, step: int, entity, callbacks) -> None:
        kinds = (Timer, Subscription) if step == 0 else (Subscription,)
        if not isinstance(entity, kinds):
            wanted = "a timer or a subscription" if step == 0 else "a subscription (it takes what step " \
                f"{step - 1} published)"
            raise TypeError(f"{where}: step {step} must be {wanted}, not {entity!r}")
        if callbacks.index(entity) != step:
            raise ValueError(f"{where}: the {label(entity)} is in the chain twice")
        self._check_alive(where, entity)

    def _check_alive(self, where: str, entity) -> None:
        try:
            with entity.handle:
                pass
        except InvalidHandle:
            raise ValueError(f"{where}: the {label(entity)} was destroyed (its node with it?)") from None

    def priority_of(self, entity):
        """The priority the executor runs ENTITY's callback at (UNRANKED: none)."""
        if id(entity) in self._given:
            return self._given[id(entity)][1]
        group = getattr(entity, "callback_group", None)
        if group is not None and id(group) in self._given:
            return self._given[id(group)][1]
        return max((chain.priority for chain, _ in self._steps.get(id(entity), ())), default=UNRANKED)

    # ---- spinning ------------------------------------------------------------------

    def spin_once(self, timeout_sec: float | None = None) -> None:
        self._spin_once_impl(timeout_sec)

    def spin_once_until_future_complete(self, future, timeout_sec=None) -> None:
        future.add_done_callback(lambda _: self.wake())
        self._spin_once_impl(timeout_sec, future.done)

    def _spin_once_until_future_complete(self, future, timeout_sec=None) -> None:
        self._spin_once_impl(timeout_sec, future.done)

    def _spin_once_impl(self, timeout_sec=None, condition=lambda: False) -> None:
        if self._spinner is None:
            self._spinner = threading.get_ident()
            self._take_the_thread()
        elif self._spinner != threading.get_ident():
            raise RuntimeError("rtaccel.ros.Executor runs its callbacks in one thread: it is spun by "
                               "another already")
        # ros2: a polling point only once what the last one found has run;
        # picas: every time, without waiting while something is ready.
        if not self._ready:
            self._poll(timeout_sec, condition)
        elif self.policy == "picas":
            self._poll(0, condition)
        if not self._ready:
            return
        chosen = 0
        if self.policy == "picas":
            best = UNRANKED
            for i, ready in enumerate(self._ready):
                if ready[3] > best:
                    best, chosen = ready[3], i
        handler, entity, node, _ = self._ready.pop(chosen)
        self._pending.discard(id(handler))
        self._execute(handler, entity, node)

    def _take_the_thread(self) -> None:
        """Pins the spinning thread to `core` and gives it `fifo_priority`;
        where real-time priorities are refused, says so once (as the rest of
        rtaccel does) and spins at the priority it has."""
        if self.core is not None:
            os.sched_setaffinity(0, {self.core})  # 0: the calling thread
        if self.fifo_priority is None:
            return
        if not realtime.ensure("rtaccel.ros").allowed:
            self.realtime = False
            return
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.fifo_priority))
        self.realtime = True

    def _poll(self, timeout_sec, condition) -> None:
        """Adds what is ready to self._ready, waiting up to TIMEOUT_SEC for
        something to be. rclpy's generator gives, for one wait, the tasks
        under way (those already in _ready among them) and then the
        entities found ready, and ends; with no time to wait it says so by
        raising TimeoutException once it has given what there was."""
        try:
            for handler, entity, node in self._wait_for_ready_callbacks(timeout_sec, None, condition):
                if id(handler) not in self._pending:
                    self._pending.add(id(handler))
                    priority = self.priority_of(entity) if entity is not None else UNRANKED
                    self._ready.append((handler, entity, node, priority))
        except (TimeoutException, ShutdownException, ExternalShutdownException, ConditionReachedException):
            pass

    def _execute(self, handler, entity, node) -> None:
        start = time.time_ns()  # CLOCK_REALTIME: the clock of the messages' source timestamps
        release = self._timer_due(entity, start) if isinstance(entity, Timer) else None
        handler()
        end = time.time_ns()
        if entity is not None and handler.done():
            self._measure(entity, start, end, release)
        exception = handler.exception()
        if exception is not None:
            where = f"node {node.get_name()!r}" if node is not None else "a task"
            exception.add_note(f"rtaccel.ros: raised by the callback of the {label(entity)} of {where}")
            raise exception
        handler.result()

    def _timer_due(self, timer, now: int) -> int | None:
        """When TIMER, found ready, was due (None: cancelled or destroyed
        since, and so no instance)."""
        try:
            until = timer.time_until_next_call()
        except InvalidHandle:
            return None
        return None if until is None else now + until

    def _take_subscription(self, sub):
        """rclpy's take, keeping the message's source timestamp for the
        chain it starts or continues."""
        try:
            with sub.handle:
                taken = sub.handle.take_message(sub.msg_type, sub.raw)
        except InvalidHandle:
            return None
        if taken is None:
            return None
        message, info = taken
        self._taken[id(sub)] = info["source_timestamp"]
        arguments = (message,) if sub._callback_type is Subscription.CallbackType.MessageOnly else taken

        async def execute():
            await await_or_execute(sub.callback, *arguments)
        return execute

    # ---- measuring -----------------------------------------------------------------

    def _measure(self, entity, start: int, end: int, timer_release: int | None) -> None:
        published = self._taken.pop(id(entity), None)
        steps = self._steps.get(id(entity), ())
        for chain, step in steps:
            if step == 0:
                release = timer_release if timer_release is not None else published
            else:
                release = next((r for s, e, r in chain.executions[step - 1]
                                if published is not None and s <= published <= e), None)
            if release is None:
                chain.unattributed += 1
                continue
            chain.executions[step].append((start, end, release))
            if step == len(chain.callbacks) - 1:
                latency = end - release
                chain.latencies_ns.append(latency)
                if chain.deadline_ns is not None and latency > chain.deadline_ns:
                    chain.deadline_misses += 1
        self._events.append((label(entity), start, end, threading.get_native_id(),
                             [chain.name for chain, _ in steps]))

    def latencies(self) -> list[dict]:
        """Per chain: its priority, deadline, instances measured, p50/p99/max
        end-to-end latency (µs), deadline misses and unattributed messages,
        in summary.json's words."""
        out = []
        for chain in self._chains.values():
            ns = chain.latencies_ns
            row = {"chain": chain.name, "priority": chain.priority,
                   "deadline_us": None if chain.deadline_ns is None else chain.deadline_ns / 1000.0,
                   "count": len(ns), "deadline_misses": chain.deadline_misses,
                   "unattributed": chain.unattributed,
                   "p50_us": None, "p99_us": None, "max_us": None}
            if ns:
                row.update(p50_us=percentile(ns, 0.50) / 1000.0, p99_us=percentile(ns, 0.99) / 1000.0,
                           max_us=max(ns) / 1000.0)
            out.append(row)
        return out

    def trace(self) -> list[dict]:
        """The callbacks run so far, as Chrome/Perfetto trace events: one
        complete slice each, on the thread that ran it, its chains in args."""
        pid = os.getpid()
        events = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "rtaccel.ros executor"}}]
        for name, start, end, tid, chains in self._events:
            events.append({"ph": "X", "cat": "callback", "name": name, "pid": pid, "tid": tid,
                           "ts": start / 1000.0, "dur": (end - start) / 1000.0, "args": {"chains": chains}})
        return events

    def write_trace(self, path) -> int:
        """trace() as a file Perfetto opens (rtaccel.timeline's, an event a
        line); returns the events written."""
        return timeline.write(pathlib.Path(path), self.trace())

    def shutdown(self, timeout_sec: float | None = None) -> bool:
        """rclpy's shutdown, the callbacks found ready and never run
        cancelled first."""
        for handler, *_ in self._ready:
            handler.cancel()
        self._ready.clear()
        self._pending.clear()
        return super().shutdown(timeout_sec)
