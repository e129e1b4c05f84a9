"""rtaccel.accel.Client against a real rtaccel-server (cpu backend): chains
declared and callbacks registered in rtaccel/accel.h's words, requests
written in place through numpy and answered right, the interpreter lock let
go while a request runs, and what a user's mistakes are told."""

import errno
import os
import struct
import threading
import time

import numpy as np
import pytest

import needs
from conftest import ROOT

from rtaccel import accel

LIB = ROOT / "python" / "rtaccel" / "lib"
MS = 1_000_000

pytestmark = [
    needs.mark("build", not (LIB / "rtaccel-server").exists(), "rtaccel-server not built (make build)"),
    needs.mark("cores2", len(os.sched_getaffinity(0)) < 2, "the cpu backend needs two cores"),
]


@pytest.fixture
def server():
    """A server of the test's own: the test guard ends what a test started."""
    device = max(os.sched_getaffinity(0))
    with accel.private_server(["--device", str(device), "--no-fifo"]) as path:
        yield path


@pytest.fixture
def client(server):
    with accel.Client(server) as c:
        yield c


def chain(name="hot", priority=10, period_ms=100, cpu_ms=1, segments=(("vecadd", 2),), callback="detect"):
    core = min(os.sched_getaffinity(0))
    return {"name": name, "priority": priority, "period_ns": period_ms * MS,
            "callbacks": [{"name": callback, "executor": f"ex-{name}", "executor_core": core,
                           "cpu_ns": cpu_ms * MS,
                           "segments": [{"service": s, "wcet_ns": w * MS} for s, w in segments]}]}


def vecadd_request(reg, n):
    request = reg.request_buffer("vecadd")
    struct.pack_into("<II", request, 0, n, 0)
    a = np.frombuffer(request, np.float32, n, offset=8)
    b = np.frombuffer(request, np.float32, n, offset=8 + 4 * n)
    return request, a, b


def test_vecadd_written_and_read_in_place(client):
    n = 1000
    reg = client.register(chain(), "detect", {"vecadd": (8 + 8 * n, 4 * n)})
    info = reg.info
    assert info["priority"] == 10 and info["wait"] == "suspend" and info["callback_id"] > 0
    request, a, b = vecadd_request(reg, n)
    assert len(request) == 8 + 8 * n
    a[:] = np.arange(n, dtype=np.float32)
    b[:] = 0.5
    assert reg.call("vecadd", 8 + 8 * n) == 4 * n
    c = np.frombuffer(reg.response_buffer("vecadd"), np.float32, n)
    assert np.array_equal(c, a + b)
    # the same arrays, changed in place, are the next request
    b[:] = -1
    ticket = reg.submit("vecadd", 8 + 8 * n)
    assert reg.wait(ticket, timeout_s=5) == 4 * n
    assert np.array_equal(c, a - 1)
    times = reg.timestamps(ticket)
    assert 0 < times["submit_ns"] <= times["start_ns"] <= times["end_ns"]
    del request, a, b, c
    reg.close()


def test_a_request_lets_the_interpreter_lock_go(client):
    reg = client.register(chain(segments=(("busy", 50),)), "detect", {"busy": (8, 8)})
    struct.pack_into("<Q", reg.request_buffer("busy"), 0, 300 * MS)
    counted = 0
    stop = threading.Event()

    def count():
        nonlocal counted
        while not stop.is_set():
            counted += 1

    other = threading.Thread(target=count)
    other.start()
    try:
        # its rate with the lock to itself (this thread sleeping lets it go)
        before = counted
        time.sleep(0.1)
        rate = (counted - before) / 0.1
        before = counted
        start = time.monotonic()
        reg.call("busy", 8)
        took = time.monotonic() - start
        during = counted - before
    finally:
        stop.set()
        other.join()
    assert took >= 0.25
    # Holding the lock through the request, the call would have let the
    # other thread count for a switch interval (5 ms) of its 300 at most.
    assert during > rate * took * 0.25, (during, rate, took)
    reg.close()


def test_a_registration_waiting_in_one_thread_is_refused_to_another(client):
    reg = client.register(chain(segments=(("busy", 50),)), "detect", {"busy": (8, 8)})
    struct.pack_into("<Q", reg.request_buffer("busy"), 0, 300 * MS)
    waiter = threading.Thread(target=reg.call, args=("busy", 8))
    waiter.start()
    try:
        # asking its timestamps changes nothing: until the other thread
        # waits they are answered, then refused as everything else is
        deadline = time.monotonic() + 5
        while True:
            try:
                reg.timestamps((0, 0))
            except ValueError as refused:
                assert "waiting on a request in another thread" in str(refused)
                break
            except OSError:
                pass  # no request on that entry yet
            assert time.monotonic() < deadline, "the other thread never waited"
        with pytest.raises(ValueError, match="waiting on a request in another thread"):
            reg.submit("busy", 8)
        with pytest.raises(ValueError, match="request waiting in another thread"):
            reg.close()
    finally:
        waiter.join()
    reg.close()


def test_wait_times_out_and_the_request_stays(client):
    reg = client.register(chain(segments=(("busy", 50),)), "detect", {"busy": (8, 8)})
    struct.pack_into("<Q", reg.request_buffer("busy"), 0, 200 * MS)
    ticket = reg.submit("busy", 8)
    assert reg.poll(ticket) is None
    with pytest.raises(TimeoutError, match="busy|hot"):
        reg.wait(ticket, timeout_s=0.01)
    assert reg.wait(ticket, timeout_s=5) == 0
    assert reg.poll(ticket) == 0
    reg.close()


def test_admission_refuses_with_the_servers_reason(client):
    with pytest.raises(OSError) as refused:
        client.register(chain("late", cpu_ms=90, segments=(("busy", 50),)), "detect", {"busy": (8, 8)})
    assert refused.value.errno == errno.EDEADLK
    assert "chain 'late'" in str(refused.value) and "bound" in str(refused.value)
    # refused, it left nothing admitted: the same chain, feasible, goes in
    reg = client.register(chain("late", cpu_ms=5, segments=(("busy", 5),)), "detect", {"busy": (8, 8)})
    reg.close()


def test_declare_and_register_all(client):
    # callbacks are named once in a system: each chain's its own
    chains = [chain("a", 20, callback="detect-a"), chain("b", 21, segments=(("busy", 1),), callback="detect-b")]
    client.declare(chains)
    regs = client.register_all([(chains[0], 0, {"vecadd": (4096, 4096)}), (chains[1], "detect-b", {"busy": (8, 8)})])
    assert [r.name for r in regs] == ["chain 'a', callback 'detect-a'", "chain 'b', callback 'detect-b'"]
    assert all(r.active for r in regs)
    client.close()
    assert not any(r.active for r in regs)
    with pytest.raises(ValueError, match="closed"):
        client.declare(chains)


def test_a_buffer_alive_keeps_its_registration(client):
    reg = client.register(chain(), "detect", {"vecadd": (4096, 4096)})
    request = reg.request_buffer("vecadd")
    view = memoryview(request)
    with pytest.raises(BufferError, match="buffers alive"):
        reg.close()
    with pytest.raises(BufferError):
        client.close()
    assert reg.active  # nothing was ended
    view[0] = 1       # and the region is still there
    view.release()
    del request
    client.close()
    assert not reg.active
    with pytest.raises(ValueError, match="has ended"):
        reg.call("vecadd", 8)


@pytest.mark.parametrize("mistake, match", [
    (lambda c: dict(c, bogus=1), "no such key 'bogus'"),
    (lambda c: dict(c, name="x" * 60), "longer than 47 bytes"),
    (lambda c: {k: v for k, v in c.items() if k != "period_ns"}, "period_ns is missing"),
    (lambda c: dict(c, callbacks=[]), "no callbacks"),
    (lambda c: dict(c, callbacks=[dict(c["callbacks"][0], wait="sometimes")]), "none of suspend, spin"),
    (lambda c: dict(c, callbacks=[{k: v for k, v in c["callbacks"][0].items() if k != "executor"}]),
     "executor is missing"),
    (lambda c: dict(c, priority="high"), "priority 'high' is not a number"),
])
def test_a_description_that_is_not_one(client, mistake, match):
    with pytest.raises(ValueError, match=match):
        client.register(mistake(chain()), "detect", {"vecadd": (4096, 4096)})


def test_what_else_a_user_can_get_wrong(client, server):
    with pytest.raises(FileNotFoundError, match="rtaccel-server at /nonexistent"):
        accel.Client("/nonexistent/server.sock")
    with pytest.raises(ValueError, match="no callback 'track'"):
        client.register(chain(), "track", {"vecadd": (4096, 4096)})
    with pytest.raises(ValueError, match="at most"):
        client.register(chain(), "detect", {"vecadd": (1 << 30, 4096)})
    reg = client.register(chain(), "detect", {"vecadd": (4096, 4096)})
    with pytest.raises(ValueError, match="no service 'matmul'"):
        reg.request_buffer("matmul")
    with pytest.raises(ValueError, match="positive"):
        reg.call("vecadd", 8, timeout_s=0)
    # a request the service refuses fails that request, not the registration
    struct.pack_into("<II", reg.request_buffer("vecadd"), 0, 1 << 20, 0)
    with pytest.raises(OSError) as refused:
        reg.call("vecadd", 8)
    assert refused.value.errno == errno.EINVAL
    struct.pack_into("<II", reg.request_buffer("vecadd"), 0, 1, 0)
    assert reg.call("vecadd", 16) == 4
    reg.close()
