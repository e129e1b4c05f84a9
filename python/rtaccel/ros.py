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
  `paam` is picas, and each callback with accelerator segments is
  registered with rtaccel-server as its chain's: accel() is its
  registration, for its requests (rtaccel.accel).
- A callback's **work** (set_work) is its CPU WCET and its accelerator
  segments, in rtaccel/accel.h's words. Under picas, with every callback in
  a chain and its work given, the executor pinned and at SCHED_FIFO,
  latencies() gives each chain's bound from rtaccel's analysis beside what
  was measured (or the premise that does not hold); under paam every chain
  is declared to the server's admission, which refuses what it cannot
  bound.

Chains are measured without a change to the messages: a subscription's
message carries the time it was published (its source timestamp), and the
executor knows which callback of the chain's previous step was running
then, so which instance of the chain the message belongs to. An instance
starts at its timer's due time (or at its first message's publication) and
ends when its last callback returns; latencies() gives p50/p99/max per
chain, trace() the callbacks as Perfetto trace events. A message published
outside this executor's callbacks starts no instance and ends none: it is
counted as unattributed.

What keeps a chain from running is said once per cause, on stderr, and
listed by problems(): a callback over its overrun_ms (the executor's, or
its chain's), said by a watchdog thread while it still runs; a chain
subscription with a publisher on its topic that it cannot hear (another
message type, an incompatible QoS), found in the graph while spinning; a
chain's callback of a node the executor does not spin. strict=True makes
spin_once raise each as ChainProblem once. shutdown(timeout_sec) waits
that long for a callback that does not return, says which it is, and
returns False: Python cannot stop the thread running it.

One executor runs one callback at a time, in the thread that spins it.
Python's interpreter lock is shared by every thread of the process, and
priorities do not reach it. Beside another thread running Python (another
executor, a thread computing), the spinning thread can lose the lock each
time it lets go of it: in every wait for the middleware (one at least per
callback of a chain) and in rclpy's calls into rcl, and, in a callback
computing for longer than the switch interval (sys.getswitchinterval(),
5 ms by default), once per interval, the threads then taking turns. Each
time, it waits up to one switch interval to have it back, and longer while
the OS keeps the holder off a core. A bound for a chain run here holds only
with a switch interval added per handoff of an instance (docs/ros.md counts
them); one executor per process, with no other Python thread busy, avoids
it.
"""

from __future__ import annotations

import collections
import os
import pathlib
import sys
import sysconfig
import threading
import time
import weakref
from dataclasses import dataclass, field

from rtaccel import realtime, ros_work, timeline
from rtaccel._core import percentile

try:
    from rclpy.callback_groups import CallbackGroup
    from rclpy.client import Client
    from rclpy.executors import (ConditionReachedException, Executor as _RclpyExecutor,
                                 ExternalShutdownException, ShutdownException, TimeoutException,
                                 await_or_execute)
    from rclpy.exceptions import InvalidHandle
    from rclpy.qos import QoSCompatibility, qos_check_compatible
    from rclpy.service import Service
    from rclpy.subscription import Subscription
    from rclpy.timer import Timer
except ImportError as err:  # pragma: no cover: said to a user without ROS 2
    raise ImportError("rtaccel.ros needs rclpy: pip install ros-kilted-rclpy ros-kilted-rmw-fastrtps-cpp "
                      "(make setup installs them into the checkout's .venv)") from err

POLICIES = ("ros2", "picas", "paam")
ENTITIES = (Timer, Subscription, Service, Client)
# Below every priority a user can give: a callback no chain holds.
UNRANKED = float("-inf")
# The executions of each chain step kept to find a message's instance by:
# a message is taken within a few instances of its publication.
KEPT_EXECUTIONS = 16
# How often a spinning executor looks at the graph for its chains'
# subscriptions: two counts per subscription (about 10 µs), the publishers'
# types and QoS only where the counts say one is not matched.
GRAPH_CHECK_S = 0.25
# Python's own library: where_now looks past its frames to the caller's.
STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
# The graph's name for the node of an endpoint whose node it has not learnt
# (yet: a ROS 2 node's name follows its endpoints; never: a DDS program's),
# and how long a problem waits for the name before it is said without it.
UNKNOWN_NODE = "_NODE_NAME_UNKNOWN_"
NODE_NAME_WAIT_S = 2.0
# shutdown() with no timeout waits as rclpy's does; past this it says once
# which callback it waits for.
SHUTDOWN_NOTE_S = 1.0
# rcl's words for an incompatible QoS (qos_check_compatible's reason), and
# the policy (rclpy's QoSPolicyKind) each names; the first that fits wins.
QOS_POLICY_WORDS = (("lease duration", "LIVELINESS_LEASE_DURATION"), ("liveliness", "LIVELINESS"),
                    ("deadline", "DEADLINE"), ("reliab", "RELIABILITY"), ("best effort", "RELIABILITY"),
                    ("durab", "DURABILITY"), ("transient", "DURABILITY"), ("volatile", "DURABILITY"))


class ChainProblem(RuntimeError):
    """A problem problems() lists, raised by spin_once when the executor was
    made with strict=True."""


@dataclass
class Chain:
    name: str
    callbacks: tuple
    priority: int
    deadline_ns: int | None
    overrun_ns: int | None = None
    period_ns: int | None = None   # declared (period_ms); else its timer's
    bound_ns: int | None = None    # the analysis', once spinning
    why_unbounded: str = "not analysed before the executor first spins"
    latencies_ns: list = field(default_factory=list)
    deadline_misses: int = 0
    unattributed: int = 0
    # per step: (start_ns, end_ns, release_ns) of its latest executions
    executions: list = field(default_factory=list)


@dataclass(slots=True)
class Running:
    """The callback the executor runs now, for the watchdog and shutdown."""
    entity: object
    node: object
    started_ns: int       # time.monotonic_ns()
    budget_ns: int | None
    said: bool = False    # its overrun said already


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


def node_name(node) -> str:
    try:
        return node.get_name()
    except InvalidHandle:
        return "(destroyed)"


def type_name(msg_type) -> str:
    """A message class's name as the graph gives it: std_msgs/msg/String."""
    package, kind, *_ = msg_type.__module__.split(".")
    return f"{package}/{kind}/{msg_type.__name__}"


def qos_faults(reason: str) -> list[tuple[str, str]]:
    """(policy, rcl's words) of each error in qos_check_compatible's REASON
    ("ERROR: Best effort publisher and reliable subscription;...")."""
    faults = []
    for part in reason.split(";"):
        part = part.strip()
        if not part.startswith("ERROR:"):
            continue
        words = part.removeprefix("ERROR:").strip()
        policy = next((p for w, p in QOS_POLICY_WORDS if w in words.lower()), "QOS")
        faults.append((policy, words))
    return faults


def where_now(thread_id: int) -> str:
    """Where the Python thread THREAD_ID is now: ' (now at FILE:LINE, in
    FUNCTION)', the innermost frame outside Python's own library (a
    callback waiting in threading.Event.wait is at its call of it), or
    nothing where it runs no Python."""
    frame = innermost = sys._current_frames().get(thread_id)
    while frame is not None and frame.f_code.co_filename.startswith(STDLIB):
        frame = frame.f_back
    frame = frame or innermost
    if frame is None:
        return ""
    return f" (now at {frame.f_code.co_filename}:{frame.f_lineno}, in {frame.f_code.co_name})"


def _watch(executor_ref, stop: threading.Event) -> None:
    """The watchdog's thread: it holds the executor weakly, so that one
    dropped without shutdown() is collected and its watchdog ends."""
    wait = 0.0
    while not stop.wait(wait):
        executor = executor_ref()
        if executor is None:
            return
        wait = executor._watch_once()
        del executor


def _budget_ns(where: str, overrun_ms) -> int | None:
    if overrun_ms is None:
        return None
    if isinstance(overrun_ms, bool) or not isinstance(overrun_ms, (int, float)) or not overrun_ms > 0:
        raise ValueError(f"{where}: overrun_ms is a positive number of milliseconds, not {overrun_ms!r}")
    return int(overrun_ms * 1e6)


class Executor(_RclpyExecutor):
    """An rclpy executor that runs callbacks by priority (policy `picas`)
    or in rclpy's own order (policy `ros2`), measuring its chains."""

    def __init__(self, policy: str = "picas", *, context=None, core: int | None = None,
                 fifo_priority: int | None = None, overrun_ms: float | None = None, strict: bool = False,
                 socket_path: str | None = None):
        self.policy = policy
        self.socket_path = socket_path  # paam: the server's; None: $RTACCEL_SOCKET, else its default
        self.core, self.fifo_priority = core, fifo_priority
        self.strict = strict
        self.realtime = None      # once spinning: whether its thread got fifo_priority
        self._given = {}          # id(callback or group) -> (it, priority)
        self._chains = {}         # name -> Chain
        self._steps = {}          # id(callback) -> [(chain, step)]
        self._ready = []          # (handler, entity, node, priority) found ready, in rclpy's order
        self._pending = set()     # id() of the handlers in _ready
        self._taken = {}          # id(subscription) -> its message's source timestamp
        self._events = []         # (label, start_ns, end_ns, thread, chain names)
        self._spinner = None
        self._running = None      # the Running callback, read by the watchdog and shutdown
        self._budgets = {}        # id(callback) -> the smallest overrun_ns its chains give
        self._watchdog = None     # its thread, started with the first callback that has a budget
        self._watch_stop = threading.Event()
        self._problems = {}       # cause -> its row of problems(), in the order found
        self._problems_lock = threading.Lock()  # the watchdog adds to them too
        self._unraised = []       # strict: the problems spin_once has yet to raise
        self._graph_due = 0.0     # time.monotonic() of the next look at the graph
        self._graph_seen = {}     # id(subscription) -> (publishers in the graph, matched) last looked at
        self._nameless = {}       # cause -> when first found with its publisher's node not yet named
        self._work = {}           # id(callback) -> its ros_work.Work (set_work)
        self._declared = {}       # id(callback) -> the callback, for set_work's
        self._prepared = False    # analysed, and registered under paam, at the first spin
        self._bounded_threads = None  # the process's threads' idents while the chains' bounds hold
        self._bounded_callbacks = None  # and the nodes' callbacks (ros_work.callbacks_of)
        self._server = ros_work.Registrations(self)
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
        self._overrun_ns = _budget_ns("the executor", overrun_ms)
        super().__init__(context=context)

    # ---- what the user declares ------------------------------------------------

    def set_priority(self, target, priority: int) -> None:
        """Gives a callback (its timer, subscription, service or client) or a
        callback group a priority, over that of the chains holding it."""
        if not isinstance(target, (*ENTITIES, CallbackGroup)):
            raise TypeError(f"set_priority: {target!r} is not a timer, subscription, service, client "
                            "or callback group")
        self._check_priority("set_priority", priority)
        self._check_not_spun("set_priority")
        if not isinstance(target, CallbackGroup):
            self._check_alive("set_priority", target)
        self._given[id(target)] = (target, priority)

    def set_work(self, target, *, cpu_wcet_ms: float, segments=(), services=None) -> None:
        """What TARGET's callback costs: its worst-case execution time on the
        CPU, and the accelerator segments it runs through rtaccel-server
        (paam), in order: SEGMENTS (service, wcet_ms) pairs. SERVICES
        {service: (request_max, response_max)}: the buffers it registers, in
        bytes; without it, a page each way for each segment's service."""
        if not isinstance(target, ENTITIES):
            raise TypeError(f"set_work: {target!r} is not a timer, subscription, service or client")
        self._check_alive("set_work", target)
        self._check_not_spun("set_work")
        self._work[id(target)] = ros_work.work_of(f"set_work of the {label(target)}", cpu_wcet_ms, segments,
                                                  services)
        self._declared[id(target)] = target

    def accel(self, target=None):
        """Under paam, the registration with rtaccel-server of TARGET's
        callback (an rtaccel.accel.Registration, for its requests); with no
        TARGET, that of the callback running now, called from it."""
        if self.policy != "paam":
            raise RuntimeError(f"accel: the executor's policy is {self.policy}; callbacks reach the server "
                               "under paam")
        if target is None:
            running = self._running
            if running is None or threading.get_ident() != self._spinner:
                raise RuntimeError("accel() with no callback is called from the callback running")
            target = running.entity
        if not self._prepared:
            raise RuntimeError("accel: the callbacks are registered with rtaccel-server as the executor "
                               "first spins")
        reg = self._server.of.get(id(target))
        if reg is None:
            raise LookupError(f"accel: {self._callback_of(target, None)} is registered with no server: "
                              "it declares no accelerator segments (set_work)")
        return reg

    def add_chain(self, name: str, callbacks, *, priority: int, deadline_ms: float | None = None,
                  overrun_ms: float | None = None, period_ms: float | None = None) -> None:
        """Declares a chain: CALLBACKS in order, a timer or a subscription
        first, then subscriptions, each taking what the one before publishes.
        Chains' priorities are distinct. OVERRUN_MS: how long each of its
        callbacks may run before the watchdog says it overran (over the
        executor's overrun_ms). PERIOD_MS: how often a chain that starts at
        a subscription is released, for the analysis and admission (a
        timer's chain has its timer's)."""
        where = f"chain {name!r}"
        self._check_not_spun(where)
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
        overrun_ns = _budget_ns(where, overrun_ms)
        period_ns = None if period_ms is None else ros_work.positive_ns(f"{where}: period_ms", period_ms)
        for step, entity in enumerate(callbacks):
            self._check_step(where, step, entity, callbacks)
        # rclpy keeps a period in whole ns of seconds: equal to a µs
        if period_ns is not None and isinstance(callbacks[0], Timer) and \
                abs(period_ns - callbacks[0].timer_period_ns) > 1000:
            raise ValueError(f"{where}: period_ms {period_ms:g} is not its timer's "
                             f"{callbacks[0].timer_period_ns / 1e6:g} ms: a timer's chain has its timer's period")
        chain = Chain(name, callbacks, priority, None if deadline_ms is None else int(deadline_ms * 1e6),
                      overrun_ns, period_ns,
                      executions=[collections.deque(maxlen=KEPT_EXECUTIONS) for _ in callbacks])
        self._chains[name] = chain
        for step, entity in enumerate(callbacks):
            self._steps.setdefault(id(entity), []).append((chain, step))
            if overrun_ns is not None:
                self._budgets[id(entity)] = min(self._budgets.get(id(entity), overrun_ns), overrun_ns)

    def _check_not_spun(self, where: str) -> None:
        """Declarations are read as the executor first spins (the analysis,
        the server's admission): one made after would be left out."""
        if self._prepared:
            raise RuntimeError(f"{where}: the executor has spun already; its chains, priorities and work "
                               "are declared before it first spins")

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
        if not self._prepared:
            self._prepare()
        self._check_the_threads()
        if self._is_shutdown:  # shut down from another thread: what it found ready never runs
            self._ready.clear()
            self._pending.clear()
            return
        if time.monotonic() >= self._graph_due:
            self._look_at_the_graph()
        self._raise_a_problem()
        # ros2: a polling point only once what the last one found has run;
        # picas (and paam): every time, without waiting while something is ready.
        by_priority = self.policy != "ros2"
        if not self._ready:
            self._poll(timeout_sec, condition)
        elif by_priority:
            self._poll(0, condition)
        if not self._ready:
            return
        chosen = 0
        if by_priority:
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

    def _prepare(self) -> None:
        """Once, at the first spin, with the thread's priority known: under
        paam the chains declared and the callbacks registered (an error
        raised here is raised again by the next spin), then the bounds."""
        if self.policy == "paam":
            self._server.make()
        ros_work.Analysis(self).run()
        self._prepared = True

    def _check_the_threads(self) -> None:
        """Whether a thread started beside the executor since its chains were
        bounded (at each spin and in latencies(): one that starts and ends
        between two is not seen); if so the interpreter lock's premise no
        longer holds and the bounds go, saying why."""
        kept = self._bounded_threads
        if kept is None or (threading.active_count() == len(kept)
                            and all(t.ident in kept for t in threading.enumerate())):
            return
        self._unbound(ros_work.others_running_python(self) or "a thread started beside the executor")

    def _unbound(self, why: str) -> None:
        """A premise of the chains' bounds no longer holds: they go, saying WHY."""
        for chain in self._chains.values():
            chain.bound_ns, chain.why_unbounded = None, why
        self._bounded_threads = self._bounded_callbacks = None

    def _node_of(self, entity):
        """The node of the executor's that has ENTITY, or None."""
        for node in self.get_nodes():
            if any(entity is e for e in (*node.timers, *node.subscriptions, *node.services, *node.clients)):
                return node
        return None

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
        if self._is_shutdown:  # since it was chosen, by another thread
            handler.cancel()
            return
        budget = self._budgets.get(id(entity), self._overrun_ns)
        if budget is not None and self._watchdog is None:
            self._start_watchdog()
        start = time.time_ns()  # CLOCK_REALTIME: the clock of the messages' source timestamps
        release = self._timer_due(entity, start) if isinstance(entity, Timer) else None
        self._running = running = Running(entity, node, time.monotonic_ns(), budget)
        try:
            handler()
        finally:
            self._running = None
        end, ran = time.time_ns(), time.monotonic_ns() - running.started_ns
        if budget is not None and ran > budget:
            self._overran(running, ran, returned=True)
        if entity is not None and handler.done():
            self._measure(entity, start, end, release)
        exception = handler.exception()
        if exception is not None:
            exception.add_note(f"rtaccel.ros: raised by {self._callback_of(entity, node)}")
            raise exception
        handler.result()
        self._raise_a_problem()

    def _callback_of(self, entity, node) -> str:
        """How errors name a callback: its entity, its node, its chains."""
        if entity is None:
            return "a task"
        steps = ", ".join(f"chain {chain.name!r} step {step}" for chain, step in self._steps.get(id(entity), ()))
        where = f" of node {node_name(node)!r}" if node is not None else ""
        return f"the callback of the {label(entity)}{where}" + (f" ({steps})" if steps else "")

    # ---- overruns: the watchdog ----------------------------------------------------

    def _start_watchdog(self) -> None:
        self._watchdog = threading.Thread(target=_watch, args=(weakref.ref(self), self._watch_stop),
                                          name="rtaccel.ros watchdog", daemon=True)
        self._watchdog.start()
        if self._bounded_threads is not None:
            self._bounded_threads = self._bounded_threads | {self._watchdog.ident}  # the executor's own

    def _watch_once(self) -> float:
        """What the watchdog does when it wakes: says the callback running
        now if it has overrun; the seconds to sleep until it would."""
        idle = min(b for b in (self._overrun_ns, *self._budgets.values()) if b is not None)
        running, now = self._running, time.monotonic_ns()
        if running is None or running.budget_ns is None:
            return idle / 1e9
        left = running.started_ns + running.budget_ns - now
        if left > 0:
            return left / 1e9
        self._overran(running, now - running.started_ns, returned=False)
        return idle / 1e9

    def _overran(self, running: Running, ran_ns: int, returned: bool) -> None:
        """An overrun of RUNNING's callback: said once per instance, while it
        runs (by the watchdog) or when it returns (by the spinning thread),
        and counted in its row of problems()."""
        with self._problems_lock:
            row = self._problems.get(("overrun", id(running.entity)))
            if returned and row is not None:
                row["longest_ms"] = max(row["longest_ms"] or 0.0, ran_ns / 1e6)
            if running.said:
                return
            running.said = True
        what, budget_ms = self._callback_of(running.entity, running.node), running.budget_ns / 1e6
        if returned:
            message = f"rtaccel.ros: {what} ran {ran_ns / 1e6:.1f} ms, over its overrun_ms of {budget_ms:g}"
        else:
            message = (f"rtaccel.ros: {what} has been running {ran_ns / 1e6:.1f} ms, over its overrun_ms of "
                       f"{budget_ms:g}{where_now(self._spinner)}; it holds the executor, and Python cannot "
                       "stop the thread that runs it")
        self._say(message)
        row = self._found(("overrun", id(running.entity)), "overrun", running.entity, running.node, message,
                          overrun_ms=budget_ms, count=0, longest_ms=ran_ns / 1e6 if returned else None)
        with self._problems_lock:
            row["count"] += 1

    def _found(self, cause, problem: str, entity, node, message: str, **more) -> dict:
        """The row of problems() for CAUSE, made (and, strict, to be raised)
        the first time it is found."""
        with self._problems_lock:
            if cause in self._problems:
                return self._problems[cause]
            row = self._problems[cause] = self._row(problem, entity, node, message, **more)
            if self.strict:
                self._unraised.append(message)
            return row

    def _row(self, problem: str, entity, node, message: str, **more) -> dict:
        return {"problem": problem, "callback": label(entity), "node": node_name(node) if node else None,
                "chains": [[chain.name, step] for chain, step in self._steps.get(id(entity), ())],
                **more, "message": message}

    def _say(self, message: str) -> None:
        """MESSAGE on stderr, as rtaccel says its notes. Not through the
        node's logger: rclpy's reads its caller's source file, and each read
        waits for the interpreter lock, which a stuck callback holds all
        but once a switch interval: seconds, where stderr takes one wait."""
        print(message, file=sys.stderr, flush=True)

    def _raise_a_problem(self) -> None:
        if self._unraised:
            raise ChainProblem(self._unraised.pop(0))

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

    # ---- the graph: what keeps a chain from running ---------------------------------

    def _look_at_the_graph(self) -> None:
        """Each chain's callbacks: one of a node this executor does not spin,
        a subscription with a publisher on its topic that it cannot hear
        (another type, incompatible QoS). Each cause is said once."""
        self._graph_due = time.monotonic() + GRAPH_CHECK_S
        if self._bounded_callbacks is not None and ros_work.callbacks_of(self) != self._bounded_callbacks:
            self._unbound("a node of the executor's has gained or lost a callback (add_node, create_timer, ...) "
                          "since its chains were bounded")
        nodes = self.get_nodes()
        seen = set()
        for chain in self._chains.values():
            for entity in chain.callbacks:
                if id(entity) in seen:
                    continue
                seen.add(id(entity))
                try:
                    self._check_alive("", entity)
                except ValueError:
                    continue  # destroyed since, its node with it: nothing of it to run
                node = next((n for n in nodes if entity in (n.timers if isinstance(entity, Timer)
                                                             else n.subscriptions)), None)
                if node is None:
                    self._not_spun(entity)
                elif isinstance(entity, Subscription):
                    self._check_publishers(entity, node)

    def _not_spun(self, entity) -> None:
        cause = ("not_spun", id(entity))
        if cause in self._problems:
            return
        message = (f"rtaccel.ros: {self._callback_of(entity, None)} is of a node this executor does not "
                   "spin (add_node it): it never runs here")
        self._found(cause, "not_spun", entity, None, message)
        self._say(message)

    def _check_publishers(self, sub, node) -> None:
        """SUB's publishers, looked at where the graph has more of them on its
        topic than it matched (and not already for these counts)."""
        try:
            topic = sub.topic_name
            counts = (node.count_publishers(topic), sub.get_publisher_count())
            if counts[0] <= counts[1] or self._graph_seen.get(id(sub)) == counts:
                return
            self._graph_seen[id(sub)] = counts
            publishers = node.get_publishers_info_by_topic(topic)
        except RuntimeError:  # InvalidHandle, RCLError: destroyed meanwhile
            return
        wanted = type_name(sub.msg_type)
        settled = True
        for info in publishers:
            if info.topic_type != wanted:
                settled &= self._unheard(sub, node, ("incompatible_type", info.topic_type), info,
                                         f"publishes {info.topic_type} on {topic}, and it takes {wanted}",
                                         type=wanted, publisher_type=info.topic_type)
                continue
            compatibility, reason = qos_check_compatible(info.qos_profile, sub.qos_profile)
            if compatibility != QoSCompatibility.ERROR:
                continue
            for policy, words in qos_faults(reason):
                settled &= self._unheard(sub, node, ("incompatible_qos", policy), info,
                                         f"publishes on {topic} with QoS it cannot take ({policy}: {words})",
                                         policy=policy, reason=words)
        if not settled:
            del self._graph_seen[id(sub)]  # looked at again at the next check

    def _unheard(self, sub, node, kind, info, why: str, **more) -> bool:
        """A publisher (INFO) that SUB cannot hear, for the reason KIND: said
        once per cause. False: not yet, its node's name not yet known."""
        cause = (kind[0], id(sub), kind[1])
        if cause in self._problems:
            return True
        publisher = None if info.node_name == UNKNOWN_NODE else info.node_name
        # the graph learns an endpoint before its node's name: a while to learn it
        if publisher is None and time.monotonic() - self._nameless.setdefault(cause, time.monotonic()) < \
                NODE_NAME_WAIT_S:
            return False
        who = f"node {publisher!r}" if publisher else "a publisher whose node the graph does not name"
        message = (f"rtaccel.ros: {self._callback_of(sub, node)}: {who} {why}: it receives none of those "
                   "messages, and the chain does not run from them")
        self._found(cause, kind[0], sub, node, message, topic=sub.topic_name, publisher_node=publisher, **more)
        self._say(message)
        return True

    def problems(self) -> list[dict]:
        """What keeps a chain from running as declared, a row per cause in
        the order found: `overrun` (a callback ran over its overrun_ms: its
        count, longest and, while it still runs, running_ms),
        `incompatible_type` and `incompatible_qos` (a publisher on a chain
        subscription's topic that it cannot hear), `not_spun` (a chain's
        callback of a node not added). Each names the callback, its node and
        its chains ([name, step]); `message` is what was said."""
        running = self._running
        with self._problems_lock:
            causes = list(self._problems)
            rows = [dict(self._problems[cause]) for cause in causes]
        for row, cause in zip(rows, causes):
            if cause[0] == "overrun":
                row["running_ms"] = None
                if running is not None and id(running.entity) == cause[1] and running.said:
                    row["running_ms"] = (time.monotonic_ns() - running.started_ns) / 1e6
        return rows

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
        in summary.json's words; the analysis' bound (µs) beside them, or
        why there is none."""
        self._check_the_threads()
        out = []
        for chain in self._chains.values():
            ns = chain.latencies_ns
            row = {"chain": chain.name, "priority": chain.priority,
                   "deadline_us": None if chain.deadline_ns is None else chain.deadline_ns / 1000.0,
                   "count": len(ns), "deadline_misses": chain.deadline_misses,
                   "unattributed": chain.unattributed,
                   "p50_us": None, "p99_us": None, "max_us": None,
                   "bound_us": None if chain.bound_ns is None else chain.bound_ns / 1000.0,
                   "why_unbounded": chain.why_unbounded}
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
        """rclpy's shutdown: stops spinning, and waits up to TIMEOUT_SEC (None
        or negative: for ever; 0: not at all) for the callback running now
        to return. False, saying which callback holds the executor, if it
        has not by then; Python cannot stop it. The callbacks found ready
        and not yet run never run."""
        for handler, *_ in list(self._ready):
            handler.cancel()
        if self._spinner in (None, threading.get_ident()):
            self._ready.clear()
            self._pending.clear()
        # rclpy's own steps, short of its clean-up: that waits for the callback
        with self._shutdown_lock:
            if not self._is_shutdown:
                self._is_shutdown = True
                if self._guard:
                    self._guard.trigger()
        if not self._wait_for_the_callback(timeout_sec):
            return False
        self._server.close(self._say)
        self._watch_stop.set()
        return super().shutdown(timeout_sec)

    def _wait_for_the_callback(self, timeout_sec) -> bool:
        """Whether the callback running now (if any) returned within
        TIMEOUT_SEC; said where it has not. Called from a callback, shutdown
        waits for none: the callback running is its caller."""
        if self._spinner == threading.get_ident():
            return True
        start = time.monotonic()
        end = None if timeout_sec is None or timeout_sec < 0 else start + timeout_sec
        noted = False
        while (running := self._running) is not None:
            now = time.monotonic()
            if end is not None and now >= end:
                self._say(f"rtaccel.ros: shutdown: after {timeout_sec:g} s "
                          f"{self._held_by(running)}; it holds the executor, and Python cannot stop the "
                          "thread that runs it")
                return False
            if end is None and not noted and now - start >= SHUTDOWN_NOTE_S:
                noted = True
                self._say(f"rtaccel.ros: shutdown waits for the callback running: "
                          f"{self._held_by(running)}")
            time.sleep(0.001)
        return True

    def _held_by(self, running: Running) -> str:
        return (f"{self._callback_of(running.entity, running.node)} has been running "
                f"{(time.monotonic_ns() - running.started_ns) / 1e6:.1f} ms{where_now(self._spinner)}")
