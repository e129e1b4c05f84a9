"""rtaccel.ros with its callbacks' work declared (set_work): under paam a
callback's requests go through a real rtaccel-server as its chain's, and the
server's admission sees the ROS 2 chains; under picas each chain's bound
comes from rtaccel's analysis where its premises hold, and where one does
not, latencies() says which."""

import errno
import os
import struct
import threading
import time

import pytest

import needs
from conftest import ROOT

try:
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from std_msgs.msg import String

    from rtaccel import accel, ros
    from test_ros import node, spin_until, spun_from_another_thread  # noqa: F401 (the fixture)
except ImportError as err:
    pytestmark = needs.mark("setup", True, f"rclpy from ROS 2's wheels: {err}")

LIB = ROOT / "python" / "rtaccel" / "lib"
CORES = sorted(os.sched_getaffinity(0))


@pytest.fixture
def server():
    if not (LIB / "rtaccel-server").exists():
        needs.skip("build", "rtaccel-server not built (make build)")
    if len(CORES) < 2:
        needs.skip("cores2", "the cpu backend needs two cores")
    with accel.private_server(["--device", str(CORES[-1]), "--no-fifo"]) as path:
        yield path


def bare(node, name="bare"):
    """A node of NODE's context with none of the services rclpy gives every
    node (parameters, type descriptions): only what the test makes."""
    return Node(name, context=node.context, start_parameter_services=False,
                parameter_overrides=[Parameter("start_type_description_service", value=False)])


def pipeline(node, executor, n=8):
    """A timer whose callback adds two vectors through the server and
    publishes the sum's first element, and a subscription taking it."""
    out = node.create_publisher(String, "sum", 10)
    sums, taken = [], []

    def detect():
        reg = executor.accel()
        request = reg.request_buffer("vecadd")
        struct.pack_into(f"<II{n}f{n}f", request, 0, n, 0, *range(n), *([0.5] * n))
        length = reg.call("vecadd", 8 + 8 * n, timeout_s=5)
        sums.append(struct.unpack_from(f"<{length // 4}f", reg.response_buffer("vecadd")))
        out.publish(String(data=str(sums[-1][0])))

    timer = node.create_timer(0.02, detect)
    sub = node.create_subscription(String, "sum", lambda m: taken.append(m.data), 10)
    return timer, sub, sums, taken


@pytest.fixture
def thread_kept():
    """The test's thread's cores and policy, given back after a test whose
    spin took them."""
    affinity, policy, param = os.sched_getaffinity(0), os.sched_getscheduler(0), os.sched_getparam(0)
    yield
    os.sched_setscheduler(0, policy, param)
    os.sched_setaffinity(0, affinity)


def test_paam_a_callbacks_requests_go_through_the_server_as_its_chains(node, server, thread_kept):
    executor = ros.Executor("paam", context=node.context, core=CORES[0], socket_path=server)
    executor.add_node(node)
    timer, sub, sums, taken = pipeline(node, executor)
    executor.add_chain("perception", [timer, sub], priority=7, deadline_ms=20)
    executor.set_work(timer, cpu_wcet_ms=2, segments=[("vecadd", 1)], services={"vecadd": (1024, 1024)})
    executor.set_work(sub, cpu_wcet_ms=1)
    spin_until(executor, lambda: len(taken) >= 5)
    assert sums[0] == tuple(i + 0.5 for i in range(8)) and taken[0] == "0.5"
    info = executor.accel(timer).info
    assert info["priority"] == 7  # the chain's, as the server admitted it
    (row,) = executor.latencies()
    assert row["count"] >= 4 and "rtaccel-server" in row["why_unbounded"]
    with pytest.raises(LookupError, match="declares no accelerator segments"):
        executor.accel(sub)
    with pytest.raises(RuntimeError, match="called from the callback running"):
        executor.accel()
    # what the first spin read is declared before it: a later declaration is refused, not left out
    with pytest.raises(RuntimeError, match="set_work: the executor has spun already"):
        executor.set_work(sub, cpu_wcet_ms=1, segments=[("vecadd", 1)])
    with pytest.raises(RuntimeError, match="has spun already"):
        executor.add_chain("late", [node.create_timer(1.0, lambda: None)], priority=2)
    assert executor.shutdown(timeout_sec=5)


def test_paam_an_executor_unpinned_is_told_admission_took_it_for_another(node, server, capfd):
    executor = ros.Executor("paam", context=node.context, socket_path=server)
    executor.add_node(node)
    timer, sub, _, taken = pipeline(node, executor)
    executor.add_chain("perception", [timer, sub], priority=7)
    executor.set_work(timer, cpu_wcet_ms=2, segments=[("vecadd", 1)], services={"vecadd": (1024, 1024)})
    executor.set_work(sub, cpu_wcet_ms=1)
    spin_until(executor, lambda: taken)
    said = capfd.readouterr().err
    assert "admission took the executor's thread to run on core 0 at SCHED_FIFO 1, and it is not pinned to " \
           "a core (core=) and does not run at SCHED_FIFO (fifo_priority=)" in said, said
    assert executor.shutdown(timeout_sec=5)


def test_paam_admission_refusing_the_chains_is_said_at_the_first_spin_and_again(node, server):
    executor = ros.Executor("paam", context=node.context, core=CORES[0], socket_path=server)
    executor.add_node(node)
    timer, sub, _, _ = pipeline(node, executor)
    executor.add_chain("perception", [timer, sub], priority=7)
    # 20 ms of CPU and 15 of accelerator every 20 ms, on one executor: no bound
    executor.set_work(timer, cpu_wcet_ms=15, segments=[("vecadd", 15)])
    executor.set_work(sub, cpu_wcet_ms=5)
    for _ in range(2):
        with pytest.raises(accel.AccelError, match="refused the executor's chains: .*chain 'perception'"):
            executor.spin_once(timeout_sec=0.1)


def test_paam_without_a_server_says_where_it_looked(node, tmp_path):
    executor = ros.Executor("paam", context=node.context, socket_path=str(tmp_path / "none.sock"))
    executor.add_node(node)
    timer = node.create_timer(0.02, lambda: None)
    executor.add_chain("c", [timer], priority=1)
    executor.set_work(timer, cpu_wcet_ms=1, segments=[("busy", 1)])
    with pytest.raises(accel.AccelError, match="cannot connect to rtaccel-server: .*none.sock"):
        executor.spin_once(timeout_sec=0.1)
    other = ros.Executor("paam", context=node.context, socket_path=str(tmp_path / "none.sock"))
    other.add_node(node)
    other.set_work(timer, cpu_wcet_ms=1, segments=[("busy", 1)])
    with pytest.raises(ValueError, match="declares accelerator segments but is in no chain"):
        other.spin_once(timeout_sec=0.1)
    with pytest.raises(RuntimeError, match="policy is picas"):
        ros.Executor(context=node.context).accel(timer)


@pytest.mark.parametrize("mistake, error, says", [
    (lambda ex, t: ex.set_work(t, cpu_wcet_ms=0), ValueError, "cpu_wcet_ms must be a positive number"),
    (lambda ex, t: ex.set_work(t, cpu_wcet_ms=1, segments=[("busy",)]), TypeError, "a \\(service, wcet_ms\\) pair"),
    (lambda ex, t: ex.set_work(t, cpu_wcet_ms=1, segments=[("busy", -1)]), ValueError, "segment 0's wcet_ms"),
    (lambda ex, t: ex.set_work(t, cpu_wcet_ms=1, segments=[("x" * 40, 1)]), ValueError, "1..31 bytes"),
    (lambda ex, t: ex.set_work(t, cpu_wcet_ms=1, segments=[("busy", 1)], services={"vecadd": (8, 8)}),
     ValueError, "the segments call busy, not among its services"),
    (lambda ex, t: ex.set_work(t, cpu_wcet_ms=1, services={"vecadd": (0, 8)}), ValueError, "in bytes"),
    (lambda ex, t: ex.set_work("timer", cpu_wcet_ms=1), TypeError, "not a timer"),
    (lambda ex, t: ex.add_chain("c", [t], priority=1, period_ms=-5), ValueError, "period_ms must be a positive"),
    (lambda ex, t: ex.add_chain("c", [t], priority=1, period_ms=500), ValueError,
     "period_ms 500 is not its timer's 1000 ms"),
])
def test_a_mistake_in_the_work_declared_is_said(node, mistake, error, says):
    executor = ros.Executor(context=node.context)
    with pytest.raises(error, match=says):
        mistake(executor, node.create_timer(1.0, lambda: None))


def two_chains(node, executor):
    """A critical chain (a timer and a subscription, 2 + 1 ms every 50 ms)
    beside a lower one (a timer, 5 ms every 100 ms) on one executor."""
    pub = node.create_publisher(String, "raw", 10)
    timer = node.create_timer(0.05, lambda: pub.publish(String(data="x")))
    sub = node.create_subscription(String, "raw", lambda m: None, 10)
    low = node.create_timer(0.1, lambda: None)
    executor.add_chain("critical", [timer, sub], priority=10)
    executor.add_chain("logging", [low], priority=1)
    executor.set_work(timer, cpu_wcet_ms=2)
    executor.set_work(sub, cpu_wcet_ms=1)
    executor.set_work(low, cpu_wcet_ms=5)
    return timer, sub, low


def bounds(executor):
    return {row["chain"]: (row["bound_us"], row["why_unbounded"]) for row in executor.latencies()}


def spin_in_a_thread(executor):
    """One spin in a thread of its own, which the executor may pin and raise
    to SCHED_FIFO: the test's keeps its core and policy."""
    thread = threading.Thread(target=executor.spin_once, kwargs={"timeout_sec": 0.05})
    thread.start()
    thread.join(20)
    assert not thread.is_alive()


def realtime_executor(node, **kwargs):
    made = bare(node)
    executor = ros.Executor(context=node.context, core=CORES[0], fifo_priority=10, **kwargs)
    executor.add_node(made)
    return made, executor


@pytest.mark.root
def test_picas_a_chains_bound_is_the_analysis_where_its_premises_hold(node, thread_kept):
    made, executor = realtime_executor(node)
    two_chains(made, executor)
    assert bounds(executor)["critical"] == (None, "not analysed before the executor first spins")
    # The test's own thread spins: no other thread of the process runs Python.
    executor.spin_once(timeout_sec=0.05)
    assert executor.realtime
    got = bounds(executor)
    critical, why = got["critical"]
    assert why == "" and critical is not None
    # its own 3 ms and the 5 ms of a lower callback that runs on (nothing
    # preempts a callback) at least; within its 50 ms period
    assert 8000 <= critical <= 50_000
    assert got["logging"][0] >= 8000  # the critical chain's 3 ms come first, at least once
    # a thread started while it spins breaks the interpreter lock's premise
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, name="started-later")
    other.start()
    try:
        executor.spin_once(timeout_sec=0.01)
    finally:
        stop.set()
        other.join()
    bound, why = bounds(executor)["critical"]
    assert bound is None and "(started-later)" in why, why
    made.destroy_node()


@pytest.mark.root
def test_a_bounded_executor_is_still_spun_by_its_own_thread_alone(node, thread_kept):
    made, executor = realtime_executor(node)
    two_chains(made, executor)
    executor.spin_once(timeout_sec=0.01)
    assert bounds(executor)["critical"][1] == ""
    refused = spun_from_another_thread(executor)
    assert refused and "spun by another already" in refused[0]
    # a callback made after the bound was made: work it does not know
    made.create_timer(0.5, lambda: None)
    time.sleep(0.3)  # past when the executor next looks at its graph (every 0.25 s)
    executor.spin_once(timeout_sec=0.01)
    bound, why = bounds(executor)["critical"]
    assert bound is None and "gained or lost a callback" in why, why
    made.destroy_node()


def test_a_timer_chains_period_ms_is_its_timers_to_a_microsecond(node):
    executor = ros.Executor(context=node.context)
    timer = node.create_timer(0.0041, lambda: None)  # rclpy keeps 4099999 ns
    executor.add_chain("c", [timer], priority=1, period_ms=4.1)


@pytest.mark.root
def test_picas_another_thread_running_python_is_a_premise_that_fails(node):
    made, executor = realtime_executor(node)
    two_chains(made, executor)
    spin_in_a_thread(executor)  # the test's thread beside it
    assert executor.realtime
    why = bounds(executor)["critical"][1]
    assert "(MainThread)" in why and "interpreter lock" in why
    made.destroy_node()


@pytest.mark.parametrize("core, setup, says", [
    (None, lambda ex, n, cb: None, "not pinned to a core"),
    (CORES[0], lambda ex, n, cb: None, "does not run at SCHED_FIFO"),
])
def test_picas_a_thread_not_pinned_or_not_at_fifo_has_no_bound(node, core, setup, says):
    made = bare(node)
    executor = ros.Executor(context=node.context, core=core)
    executor.add_node(made)
    two_chains(made, executor)
    spin_in_a_thread(executor)
    for bound, why in bounds(executor).values():
        assert bound is None and says in why, why
    made.destroy_node()


def camera_chain(executor, node):
    sub = node.create_subscription(String, "camera", lambda m: None, 1)
    executor.add_chain("camera", [sub], priority=5)
    executor.set_work(sub, cpu_wcet_ms=1)


@pytest.mark.root
@pytest.mark.parametrize("setup, says", [
    (lambda ex, n, cb: ex.set_priority(cb[2], 20), "runs at a priority other than its chains'"),
    (lambda ex, n, cb: ex.add_chain("more", [n.create_timer(1.0, lambda: None)], priority=4),
     "declares no cpu_wcet_ms"),
    (lambda ex, n, cb: n.create_timer(1.0, lambda: None), "is in no chain"),
    (lambda ex, n, cb: camera_chain(ex, n), "declares no period_ms"),
])
def test_picas_without_a_premise_of_the_analysis_the_chains_have_no_bound_and_say_why(node, setup, says):
    made, executor = realtime_executor(node)
    callbacks = two_chains(made, executor)
    setup(executor, made, callbacks)
    spin_in_a_thread(executor)
    assert executor.realtime
    for bound, why in bounds(executor).values():
        assert bound is None and says in why, why
    made.destroy_node()


@pytest.mark.root
def test_picas_a_node_with_rclpys_own_services_is_told_how_to_go_without_them(node):
    executor = ros.Executor(context=node.context, core=CORES[0], fifo_priority=10)
    executor.add_node(node)
    two_chains(node, executor)
    spin_in_a_thread(executor)
    why = bounds(executor)["critical"][1]
    assert "is in no chain" in why and "start_parameter_services=False" in why, why


@pytest.mark.root
def test_picas_a_subscriptions_chain_with_its_period_is_bounded(node, thread_kept):
    made = bare(node)
    executor = ros.Executor(context=node.context, core=CORES[0], fifo_priority=10)
    executor.add_node(made)
    sub = made.create_subscription(String, "camera", lambda m: None, 10)
    executor.add_chain("from_camera", [sub], priority=3, period_ms=33)
    executor.set_work(sub, cpu_wcet_ms=1)
    executor.spin_once(timeout_sec=0.05)
    assert bounds(executor)["from_camera"] == (1000.0, "")
    made.destroy_node()


def throttling():
    """Whether the kernel's real-time throttling (of its default period, 1 s)
    would stop a thread asked 49 ms every 50 ms: 21 x 49 = 1029 ms a period."""
    runtime = int(open("/proc/sys/kernel/sched_rt_runtime_us").read())
    period = int(open("/proc/sys/kernel/sched_rt_period_us").read())
    return period == 1_000_000 and 0 <= runtime < min(period, 1_029_000), runtime


@pytest.mark.root
def test_picas_a_load_the_real_time_throttling_stops_has_no_bound(node):
    made, executor = realtime_executor(node)
    timer = made.create_timer(0.05, lambda: None)
    executor.add_chain("busy", [timer], priority=3)
    executor.set_work(timer, cpu_wcet_ms=49)  # 98% of its period
    spin_in_a_thread(executor)
    bound, why = bounds(executor)["busy"]
    throttled, runtime = throttling()
    if throttled:
        assert bound is None and "its callbacks may ask its thread for 1029 ms in a throttling period of 1000 ms" \
            in why and f"sched_rt_runtime_us {runtime}" in why, why
    else:  # throttling off, as the field tunes its machines: the next premise is the test's thread
        assert "(MainThread)" in why, why
    made.destroy_node()
