"""What rtaccel.ros's callbacks cost (Executor.set_work), and the two uses
made of it once the executor first spins: under `picas` the analysis' bound
of each chain, under `paam` the callbacks with accelerator segments
registered with rtaccel-server as their chains'. rtaccel/ros.h does the same
for rcl (src/ros/report.cc), in the same words."""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass

from rclpy.event_handler import EventHandler

from rtaccel import _core, accel

# rtaccel/accel.h's limits
NAME_MAX = 47
MAX_SEGMENTS = 8
MAX_BUFFER = 64 << 20
# A service's buffers where set_work names none: a page each way, the
# built-in services' small requests (rtaccel/ros.h's default too).
DEFAULT_BUFFER = 4096


@dataclass(frozen=True)
class Work:
    """A callback's cost: its CPU WCET, and its accelerator segments in order
    with the buffers of the services they call."""
    cpu_wcet_ns: int
    segments: tuple = ()   # (service, wcet_ns)
    services: tuple = ()   # (service, request_max, response_max)


def work_of(where: str, cpu_wcet_ms, segments, services) -> Work:
    """set_work's arguments checked, as a Work; ValueError or TypeError
    naming what is wrong."""
    cpu_wcet_ns = positive_ns(f"{where}: cpu_wcet_ms", cpu_wcet_ms)
    segments = tuple(segments)
    if len(segments) > MAX_SEGMENTS:
        raise ValueError(f"{where}: {len(segments)} segments, at most {MAX_SEGMENTS}")
    checked = []
    for i, segment in enumerate(segments):
        if not (isinstance(segment, tuple) and len(segment) == 2 and isinstance(segment[0], str)):
            raise TypeError(f"{where}: segment {i} is a (service, wcet_ms) pair, not {segment!r}")
        _name(f"{where}: segment {i}'s service", segment[0])
        checked.append((segment[0], positive_ns(f"{where}: segment {i}'s wcet_ms", segment[1])))
    if services is None:
        services = {name: (DEFAULT_BUFFER, DEFAULT_BUFFER) for name, _ in checked}
    if not isinstance(services, dict):
        raise TypeError(f"{where}: services is a dict {{service: (request_max, response_max)}}")
    buffers = []
    for name, sizes in services.items():
        _name(f"{where}: service", name)
        if not (isinstance(sizes, tuple) and len(sizes) == 2 and all(isinstance(n, int) and 0 < n <= MAX_BUFFER
                                                                      for n in sizes)):
            raise ValueError(f"{where}: service {name!r}: buffers are (request_max, response_max) in bytes, "
                             f"1..{MAX_BUFFER}, not {sizes!r}")
        buffers.append((name, *sizes))
    missing = sorted({name for name, _ in checked} - set(services))
    if missing:
        raise ValueError(f"{where}: the segments call {', '.join(missing)}, not among its services")
    return Work(cpu_wcet_ns, tuple(checked), tuple(buffers))


def positive_ns(where: str, ms) -> int:
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
        raise ValueError(f"{where} must be a positive number of milliseconds, not {ms!r}")
    return max(1, int(ms * 1e6))


def _name(where: str, name: str) -> None:
    if not isinstance(name, str) or not name or len(name.encode()) > 31:
        raise ValueError(f"{where} {name!r}: a service's name is 1..31 bytes")


def names_of(entities, node_of) -> dict:
    """A name for each entity's callback, unique among them and short enough
    for the server (47 bytes): its node's, then its topic or service, or
    'timer' and its place among its node's timers."""
    names, used = {}, set()
    for entity in entities:
        node = node_of(entity)
        what = getattr(entity, "topic_name", None) or getattr(entity, "srv_name", None)
        if what is None:
            what = "timer" + (str([t for t in node.timers].index(entity)) if node is not None else "")
        base = f"{node.get_name() if node is not None else '?'}{'' if what.startswith('/') else '/'}{what}"
        name, n = base[-NAME_MAX:], 1
        while name in used:
            n += 1
            name = f"{base[-(NAME_MAX - 1 - len(str(n))):]}#{n}"
        used.add(name)
        names[id(entity)] = name
    return names


class Analysis:
    """Each chain's bound under picas, given where the analysis' premises
    hold (the rcl executor's): every callback the executor may run in a
    chain with its WCET, every chain's period, its thread pinned and at
    SCHED_FIFO, callbacks at their chains' priorities, a load the kernel's
    real-time throttling does not stop, and no other thread of the process
    running Python (the interpreter lock, docs/ros.md)."""

    def __init__(self, executor):
        self.executor = executor

    def run(self) -> None:
        ex = self.executor
        why = self.why_not()
        for chain in ex._chains.values():
            chain.bound_ns, chain.why_unbounded = None, why
        if why:
            return
        entities = list(_chain_entities(ex))
        index = {id(e): i for i, e in enumerate(entities)}
        names = names_of(entities, ex._node_of)
        workload = _core.executor_workload(
            "rtaccel.ros", [("rclpy", ex.core, ex.fifo_priority)],
            [(names[id(e)], 0, ex._work[id(e)].cpu_wcet_ns) for e in entities],
            [(c.name, c.priority, period_ns(c), c.deadline_ns or 0, [index[id(e)] for e in c.callbacks])
             for c in ex._chains.values()])
        for chain, result in zip(ex._chains.values(), _core.analyze(workload)):
            chain.bound_ns = result.wcrt_ns if result.bounded else None
            chain.why_unbounded = "" if result.bounded else f"the analysis finds no bound: {result.reason}"
        # the premise held: the spinning thread (and the watchdog) alone; a
        # thread started later breaks it, and each spin looks
        ex._bounded_threads = frozenset({ex._spinner} | ({ex._watchdog.ident} if ex._watchdog else set()))
        # and these callbacks: one added later is work the bound does not know
        ex._bounded_callbacks = callbacks_of(ex)

    def why_not(self) -> str:
        ex = self.executor
        if ex.policy == "ros2":
            return "the ros2 policy is not analysed (rtaccel's analysis is of priority-driven executors)"
        if ex.policy == "paam":
            return "under paam the bound is rtaccel-server's: admission refuses a chain it cannot bound"
        if not ex._chains:
            return "no chains"
        if ex.core is None:
            return "the executor is not pinned to a core (core=)"
        if not ex.realtime:
            return "its thread does not run at SCHED_FIFO (fifo_priority=, and the right to it)"
        chained = {id(e) for e in _chain_entities(ex)}
        for node in ex.get_nodes():
            # A publisher's and a subscription's QoS event handlers run only on
            # a fault of the middleware's (an incompatible QoS, a deadline
            # missed), which problems() says; anything else waitable (an
            # action) is work the analysis does not know.
            if any(not isinstance(w, EventHandler) for w in node.waitables):
                return f"node {node.get_name()!r} has waitables (actions), which the analysis does not know"
            if any(True for _ in node.guards):
                return f"node {node.get_name()!r} has guard conditions, whose callbacks the analysis does not know"
            for entity in (*node.timers, *node.subscriptions, *node.services, *node.clients):
                if id(entity) not in chained:
                    hint = (" (a node's parameter and type description services: Node(..., "
                            "start_parameter_services=False, parameter_overrides=[Parameter("
                            "'start_type_description_service', value=False)]))"
                            if _is_a_nodes_own(entity) else "")
                    return f"{ex._callback_of(entity, node)} is in no chain{hint}"
        for chain in ex._chains.values():
            for entity in chain.callbacks:
                if id(entity) not in ex._work:
                    return f"{ex._callback_of(entity, None)} declares no cpu_wcet_ms (set_work)"
                if ex.priority_of(entity) != max(c.priority for c, _ in ex._steps[id(entity)]):
                    return f"{ex._callback_of(entity, None)} runs at a priority other than its chains'"
            if period_ns(chain) is None:
                return f"chain {chain.name!r} starts with a subscription and declares no period_ms"
        throttled = _core.rt_throttles([(work.cpu_wcet_ns, min(period_ns(c) for c, _ in ex._steps[entity_id]))
                                        for entity_id, work in ex._work.items() if entity_id in ex._steps])
        if throttled:
            return throttled
        return others_running_python(ex)


def others_running_python(ex) -> str:
    """The premise of the interpreter lock, checked: the threads of the
    process other than the spinning one (and the executor's watchdog, which
    wakes only when a callback is due to overrun) named, where there are any;
    else ""."""
    others = [t.name for t in threading.enumerate()
              if t.ident != ex._spinner and t is not ex._watchdog and t.is_alive()]
    if not others:
        return ""
    return (f"threads of this process beside the executor's ({', '.join(others)}) would share "
            "the interpreter lock with it: a switch interval per handoff (docs/ros.md)")


def callbacks_of(ex) -> frozenset:
    """What the executor's nodes may run, as the premise counts it: their
    timers, subscriptions, services, clients, guard conditions and
    waitables."""
    return frozenset(id(e) for node in ex.get_nodes()
                     for e in (*node.timers, *node.subscriptions, *node.services, *node.clients,
                               *node.guards, *node.waitables))


def _is_a_nodes_own(entity) -> bool:
    name = getattr(entity, "srv_name", "") or ""
    return "/get_parameter" in name or "/set_parameter" in name or "/list_parameters" in name \
        or "/describe_parameters" in name or "/get_type_description" in name


def _chain_entities(ex):
    seen = set()
    for chain in ex._chains.values():
        for entity in chain.callbacks:
            if id(entity) not in seen:
                seen.add(id(entity))
                yield entity


def period_ns(chain) -> int | None:
    """A chain's period: its timer's, else the period_ms it declares."""
    if chain.period_ns is not None:
        return chain.period_ns
    return getattr(chain.callbacks[0], "timer_period_ns", None)


class Registrations:
    """paam: the executor's chains declared to rtaccel-server's admission,
    and each callback with accelerator segments registered as its most
    critical chain's."""

    def __init__(self, executor):
        self.executor = executor
        self.client = None
        self.of = {}  # id(entity) -> accel.Registration

    def make(self) -> None:
        ex = self.executor
        users = [e for e in _chain_entities(ex) if ex._work.get(id(e), Work(0)).segments]
        for entity_id, work in ex._work.items():
            if work.segments and entity_id not in ex._steps:
                raise ValueError(f"rtaccel.ros: {ex._callback_of(ex._declared[entity_id], None)} declares "
                                 "accelerator segments but is in no chain: the server admits chains")
        if not users:
            return
        entities = list(_chain_entities(ex))
        names = names_of(entities, ex._node_of)
        descs = {c.name: self._chain_desc(c, names) for c in ex._chains.values()}
        try:
            client = accel.Client(ex.socket_path)
        except OSError as err:
            raise accel.AccelError(f"rtaccel.ros: cannot connect to rtaccel-server: {err}") from None
        try:
            client.declare(list(descs.values()))
            items = []
            for entity in users:
                chain = max((c for c, _ in ex._steps[id(entity)]), key=lambda c: c.priority)
                services = {name: (req, resp) for name, req, resp in ex._work[id(entity)].services}
                items.append((descs[chain.name], chain.callbacks.index(entity), services))
            regs = client.register_all(items)
        except OSError as err:
            client.close()
            raise accel.AccelError(f"rtaccel.ros: rtaccel-server refused the executor's chains: "
                                   f"{err.strerror}") from None
        self.client = client
        self.of = {id(e): reg for e, reg in zip(users, regs)}
        self._say_where_admission_took_it()

    def _say_where_admission_took_it(self) -> None:
        """Admission analyses the executor's thread on its core at its
        SCHED_FIFO priority; where it has neither, that analysis is of
        another thread than the one that runs: said, once."""
        ex = self.executor
        missing = [what for what, lacking in (("is not pinned to a core (core=)", ex.core is None),
                                              ("does not run at SCHED_FIFO (fifo_priority=)", not ex.realtime))
                   if lacking]
        if missing:
            ex._say(f"rtaccel.ros: paam: admission took the executor's thread to run on core "
                    f"{ex.core if ex.core is not None else 0} at SCHED_FIFO {ex.fifo_priority or 1}, and it "
                    f"{' and '.join(missing)}: the server's bounds do not hold for its chains")

    def _chain_desc(self, chain, names) -> dict:
        ex = self.executor
        period = period_ns(chain)
        if period is None:
            raise ValueError(f"rtaccel.ros: chain {chain.name!r} starts with a subscription and declares no "
                             "period_ms: the server admits chains by their period")
        if len(chain.name.encode()) > NAME_MAX:
            raise ValueError(f"rtaccel.ros: chain {chain.name!r}: the server takes names of {NAME_MAX} bytes")
        callbacks = []
        for entity in chain.callbacks:
            work = ex._work.get(id(entity), Work(0))
            callbacks.append({"name": names[id(entity)], "executor": f"rclpy-{os.getpid()}",
                              # an unpinned thread is analysed on core 0: the server needs a core
                              "executor_core": ex.core if ex.core is not None else 0,
                              "executor_priority": ex.fifo_priority or 1, "cpu_ns": work.cpu_wcet_ns,
                              "segments": [{"service": s, "wcet_ns": w} for s, w in work.segments]})
        return {"name": chain.name, "priority": chain.priority, "period_ns": period,
                "deadline_ns": chain.deadline_ns or period, "release": "unaligned", "callbacks": callbacks}

    def close(self, say) -> None:
        """Ends the registrations and the connection; one a buffer of which
        the program still holds stays until the program lets it go (said)."""
        for reg in self.of.values():
            try:
                reg.close()
            except (BufferError, ValueError) as err:  # a buffer alive; a request waiting in another thread
                say(f"rtaccel.ros: shutdown: {err}")
        self.of = {}
        if self.client is not None:
            try:
                self.client.close()
            except (BufferError, ValueError):
                pass  # said above; the connection ends with the last of them
            self.client = None
