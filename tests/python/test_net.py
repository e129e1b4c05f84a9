"""The net layer from the outside: the link bound in Python, and the
benchmarks that compare the flow-control layer with its raw transport, run
the way a user runs them. Timing checks are ratios against the raw case in
the same run, with wide margins."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

import needs

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "python" / "rtaccel" / "lib" / "rtaccel-net-bench"
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "python"))

sys.path.insert(0, str(ROOT / "python"))

from rtaccel import _core  # noqa: E402

pytestmark = needs.mark("build", not BENCH.exists(), "rtaccel-net-bench not built (make build)")


def rtaccel(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "rtaccel.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


def bench_json(*args):
    proc = rtaccel("bench", *args, "--json")
    if proc.returncode == 77:
        needs.skip_program(proc.stderr.strip() or proc.stdout.strip())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_link_bound_in_python():
    link = _core.NetLink(125e6, chunk_bytes=64 << 10, window_bytes=128 << 10)
    flows = [_core.NetFlow("hi", 3, 1 << 20, 100_000_000), _core.NetFlow("lo", 1, 4 << 20, 200_000_000)]
    hi, lo = _core.analyze_net_link(link, flows)
    assert hi.bounded and hi.schedulable
    assert hi.transmission_ns == 8_388_608
    assert hi.blocking_ns == 1_572_864  # one chunk and the window, not the 4 MiB transfer
    assert lo.wcrt_ns == _core.net_transfer_ns(link, 4 << 20) + hi.transmission_ns


@pytest.mark.parametrize("transport", ["tcp", "shm"])
def test_net_overhead_reports_every_size(transport):
    result = bench_json("net-overhead", "--transport", transport, "--sizes", "64K,1M")
    assert result["transport"] == transport
    assert [r["size"] for r in result["sizes"]] == [64 << 10, 1 << 20]
    for r in result["sizes"]:
        assert r["raw_p50_us"] > 0 and r["flow_p50_us"] > 0
        assert {"overhead_us", "overhead_pct", "raw_open_p50_us"} <= r.keys()
    # the goal is judged size by size, the larger of its two limits
    goal = result["goal"]
    assert (goal["limit_pct"], goal["limit_us"]) == (2.0, 20.0)
    over = [r["size"] for r in result["sizes"] if r["overhead_us"] > max(20.0, r["raw_p50_us"] * 0.02)]
    assert goal["sizes_over"] == over and goal["met"] == (not over)


def test_net_zerocopy_says_how_often_the_kernel_copied():
    result = bench_json("net-zerocopy", "--sizes", "64K,256K", "--samples", "20")
    assert (result["chunk"], result["window"]) == (64 << 10, 128 << 10)
    assert [r["size"] for r in result["sizes"]] == [64 << 10, 256 << 10]
    assert result["send_unread_bytes"] > 0 and result["zerocopy_unread_bytes"] > 0, result
    for r in result["sizes"]:
        assert r["samples"] == 20 and r["send_p50_us"] > 0 and r["zerocopy_p50_us"] > 0
        # every transfer's chunks, the two warm-up transfers' too, went as
        # zero-copy sends, and each was completed
        assert r["zerocopy_sends"] >= 22 * (r["size"] // (64 << 10)), r
        assert 0 <= r["copied_pct"] <= 100 and r["completions_p50_us"] >= 0, r


def test_the_flow_control_goal_takes_the_larger_limit():
    from rtaccel.commands.bench import net_overhead_goal

    sizes = [{"size": 4096, "raw_p50_us": 20.0, "overhead_us": 19.0},        # 95%, under 20 us
             {"size": 32 << 20, "raw_p50_us": 12000.0, "overhead_us": 230.0},  # 1.9%, over 20 us
             {"size": 1 << 20, "raw_p50_us": 400.0, "overhead_us": 21.0}]      # over both
    assert net_overhead_goal(sizes) == {"limit_pct": 2.0, "limit_us": 20.0, "sizes_over": [1 << 20], "met": False}
    assert net_overhead_goal(sizes[:2])["met"]


@pytest.mark.slow
def test_net_priority_beats_sharing_a_link():
    """Four flows over a rate-limited veth: raw, the high flow shares the
    bottleneck with three others; with flow control it waits for one chunk
    and the window. Its median latency must be well below raw's, and the
    equal-priority transfers leave in the order they were issued."""
    result = bench_json("net-priority", "--sizes", "1M")
    r = result["sizes"][0]
    assert r["raw_p50_us"] > 1.5 * r["flow_p50_us"], r
    assert r["flow_p50_us"] < 3 * r["solo_us"], r
    eq = result["equal_priority"]
    assert eq["flow_in_order_pct"] > eq["raw_in_order_pct"], eq
    assert eq["flow_in_order_pct"] > 90, eq


@pytest.mark.parametrize("args, message", [
    (["net-overhead", "--sizes", "1Q"], "expected sizes like"),
    (["net-overhead", "--sizes", "128M"], "larger than 64M"),
    (["net-priority", "--transport", "udp"], "invalid choice"),
    (["net-zerocopy", "--chunk", "1"], "a chunk of 1K..16M"),
])
def test_bad_arguments_are_named(args, message):
    proc = rtaccel("bench", *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bench_program_refuses_bad_input():
    for args in (["nonsense"], ["overhead", "--transport", "pigeon"], ["overhead", "--sizes", "0"]):
        proc = subprocess.run([str(BENCH), *args], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr


def test_multi_node_workload_is_analyzed_with_its_network_term():
    proc = rtaccel("analyze", str(ROOT / "examples" / "partitioned_pipeline.yaml"), "--json")
    assert proc.returncode == 0, proc.stderr
    chains = {c["chain"]: c for c in json.loads(proc.stdout)["chains"]}
    detect = chains["detect"]["breakdown"]
    # the 5.6 MB feature map at 1 Gbit/s (47 ms with TCP/IP's headers) and
    # one chunk and the window of the 8 MB upload beside it, not the upload
    # itself (70 ms)
    assert 47_000 < detect["network_us"] < 51_000, detect
    assert chains["map"]["breakdown"]["network_us"] > 67_000
