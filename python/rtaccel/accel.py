"""The accelerator server from Python: its client (Client), a private
``rtaccel-server`` to run, and its benchmarks (``rtaccel bench``).

Client is rtaccel/accel.h's client: a connection to a server, chains
declared to its admission and callbacks registered with them, as dicts in
the header's words; a registration's buffers are the shared region itself,
so that a request written through numpy lands where the server reads it:

    with accel.Client(socket_path) as client:
        chain = {"name": "hot", "priority": 10, "period_ns": 100_000_000,
                 "callbacks": [{"name": "detect", "executor": "ex", "cpu_ns": 1_000_000,
                                "segments": [{"service": "vecadd", "wcet_ns": 2_000_000}]}]}
        reg = client.register(chain, "detect", {"vecadd": (8 + 2 * 4 * n, 4 * n)})
        request = reg.request_buffer("vecadd")
        struct.pack_into("<II", request, 0, n, 0)
        a = numpy.frombuffer(request, numpy.float32, n, offset=8)
        ...
        reg.call("vecadd", 8 + 2 * 4 * n)   # the interpreter lock is let go while it waits

Refusals are OSErrors with the server's reason: PermissionError (a
priority this user may not have), errno EDEADLK (admission found a deadline
miss), ValueError for a description that is not one, before anything is sent.

The server and the benchmark client are ``lib/rtaccel-server`` and
``lib/rtaccel-accel-bench`` beside this package (built by CMake);
``RTACCEL_LIB_DIR`` overrides the folder.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from rtaccel import _core
from rtaccel._core import AccelBuffer as Buffer  # noqa: F401 (the package's names)
from rtaccel._core import AccelClient as Client  # noqa: F401
from rtaccel._core import AccelRegistration as Registration  # noqa: F401
from rtaccel.errors import Error

LIB_DIR = Path(os.environ.get("RTACCEL_LIB_DIR", Path(__file__).resolve().parent / "lib"))
PR_SET_PDEATHSIG = 1


class AccelError(Error):
    """A server or benchmark that could not run, with the reason (a runtime
    failure)."""


def binary(name: str) -> Path:
    """The path of one of rtaccel's programs beside this package."""
    path = LIB_DIR / name
    if not path.exists():
        raise AccelError(f"{path} is missing: build rtaccel first (make build)")
    return path


def stop_with_parent() -> None:
    """preexec_fn for the programs rtaccel starts: SIGTERM when the process
    that started them dies, whatever killed it, so that a killed `rtaccel`
    never leaves a run (SCHED_FIFO executors, namespaces, cgroups) going on;
    SIGTERM lets them clean up as they do when interrupted."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def default_cores() -> tuple[int, int]:
    """(device core, client core): the last core is the device, the client the first."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise AccelError("the cpu backend needs two cores: one is the device")
    return cores[-1], cores[0]


@contextlib.contextmanager
def private_server(args: list[str], startup_s: float = 10.0, prefix: tuple = ()):
    """Runs rtaccel-server on a temporary socket for the duration of the block;
    yields the socket path. The server says when it serves through its
    readiness pipe (--ready-fd); it is stopped (SIGTERM, then SIGKILL) after.
    `prefix` runs it through a command (`ip netns exec NS`, which execs it)."""
    with tempfile.TemporaryDirectory(prefix="rtaccel-") as tmp:
        path = os.path.join(tmp, "server.sock")
        ready_r, ready_w = os.pipe()
        try:
            proc = subprocess.Popen([*prefix, str(binary("rtaccel-server")), "--socket", path, *args,
                                     "--ready-fd", str(ready_w)], pass_fds=(ready_w,),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                    preexec_fn=stop_with_parent)
        finally:
            os.close(ready_w)
        try:
            with os.fdopen(ready_r, "rb") as ready:
                if not select.select([ready], [], [], startup_s)[0]:
                    raise AccelError("rtaccel-server did not get ready in time")
                if ready.readline() != b"ready\n":
                    proc.wait(timeout=5)
                    raise AccelError("rtaccel-server did not start: " + proc.stderr.read().strip())
            yield path
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run_bench(what: str, extra: list[str], levels: int = 4, fifo: bool = True,
              backend: str = "cpu", device: int = 0) -> dict:
    """Runs one benchmark of ``rtaccel-accel-bench`` against a private server:
    cpu (device: the last core; client: the first, at SCHED_FIFO 50 when
    allowed) or cuda (GPU `device`; the client on the first core)."""
    if backend == "cpu":
        device, client = default_cores()
        server_args = ["--device", str(device), "--server-core", str(client),
                       "--levels", str(levels)]
    else:
        client = sorted(os.sched_getaffinity(0))[0]
        server_args = ["--backend", backend, "--device", str(device), "--levels", str(levels)]
        if what == "preemption":
            extra = [*extra, "--sizes", "gpu"]
    if not fifo:
        server_args.append("--no-fifo")
    with private_server(server_args, startup_s=60.0) as path:
        return _bench_client(what, path, extra, fifo, client)


def _bench_client(what: str, socket: str, extra: list[str], fifo: bool, client: int) -> dict:
    """rtaccel-accel-bench WHAT against the server at SOCKET, on core CLIENT
    (at SCHED_FIFO 50 with FIFO): its JSON."""
    cmd = [str(binary("rtaccel-accel-bench")), what, "--socket", socket, "--json", *extra]
    if fifo:
        cmd = ["chrt", "-f", "50", *cmd]
    proc = subprocess.run(["taskset", "-c", str(client), *cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        raise AccelError(f"rtaccel-accel-bench {what} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


# What the kernels run beside in `rtaccel bench corunners`: nothing, then a
# memory hog (rtaccel membench) that writes or reads, or a busy core that
# makes no memory traffic (membench cache: a loop over 16 KiB in L1), on the
# device's core (between kernels: what it leaves of the core's caches) or on
# the client's (during them: what it takes of the shared cache and memory).
CORUNNER_PLACES = ("device", "client")
CORUNNER_MODES = ("write", "read", "cache")


def kernels_beside_corunners(rounds: int, iterations: int, hog_size: str, fifo: bool = True) -> dict:
    """The server's kernels (rtaccel-accel-bench kernels) alone and beside a
    memory hog at each place, in ROUNDS rounds that take the configurations
    in turn, so that the machine's changes of speed fall on all of them; each
    configuration's p50 and p99 and their ratios to alone's."""
    device, client = default_cores()
    cores = {"device": device, "client": client}
    configs = [("alone", None, None)] + [(f"{mode}, {place} core", mode, cores[place])
                                         for place in CORUNNER_PLACES for mode in CORUNNER_MODES]
    samples: dict[str, dict[str, list]] = {name: {} for name, _, _ in configs}
    kernels: dict[str, dict] = {}
    moved: dict[str, list] = {}
    server_args = ["--device", str(device), "--server-core", str(client)] + ([] if fifo else ["--no-fifo"])
    with private_server(server_args, startup_s=60.0) as path:
        for _ in range(rounds):
            for name, mode, core in configs:
                hog = None
                try:
                    if mode:
                        size = [] if mode == "cache" else ["--size", hog_size]
                        hog = subprocess.Popen(["taskset", "-c", str(core), str(binary("rtaccel-membench")),
                                                mode, *size, "--json"], stdout=subprocess.PIPE,
                                               stderr=subprocess.DEVNULL, text=True, preexec_fn=stop_with_parent)
                        _wait_for_handler(hog, signal.SIGTERM)
                        time.sleep(0.3)  # past the first pass, which faults its buffer in
                    doc = _bench_client("kernels", path, ["--iterations", str(iterations)], fifo, client)
                finally:
                    if hog:
                        hog.terminate()
                        printed, _ = hog.communicate()
                if hog:
                    # what it moved, as it says when stopped: that it ran
                    if not printed.strip():
                        raise AccelError(f"rtaccel-membench {mode} ended without its figures "
                                         f"(status {hog.returncode})")
                    moved.setdefault(name, []).append(json.loads(printed.splitlines()[-1])["mb_per_s"])
                for kernel, k in doc["kernels"].items():
                    kernels[kernel] = {"n": k["n"], "request_bytes": k["request_bytes"]}
                    samples[name].setdefault(kernel, []).extend(k["us"])
    for kernel, k in kernels.items():
        alone = samples["alone"][kernel]
        base = _core.percentile(alone, 0.5), _core.percentile(alone, 0.99)
        k["configurations"] = {}
        for name, _, _ in configs:
            took = samples[name][kernel]
            p50, p99 = _core.percentile(took, 0.5), _core.percentile(took, 0.99)
            k["configurations"][name] = {"samples": len(took), "p50_us": round(p50, 1), "p99_us": round(p99, 1),
                                         "max_us": round(max(took), 1), "p50_vs_alone": round(p50 / base[0], 3),
                                         "p99_vs_alone": round(p99 / base[1], 3)}
    return {"version": 1, "benchmark": "corunners", "rounds": rounds, "iterations": iterations,
            "hog_size": hog_size, "device_core": device, "client_core": client, "kernels": kernels,
            "hog_mb_per_s": {name: round(_core.percentile(mbs, 0.5)) for name, mbs in moved.items()}}


def _wait_for_handler(proc: subprocess.Popen, signo: int, timeout_s: float = 30.0) -> None:
    """Until PROC (through any exec) handles SIGNO, as /proc says: a signal
    sent earlier would kill it instead of asking it to stop and report."""
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("SigCgt:") and int(line.split()[1], 16) >> (signo - 1) & 1:
                    return
        except OSError:
            pass
        time.sleep(0.001)
    raise AccelError(f"{' '.join(map(str, proc.args))} did not start "
                     + ("in time" if proc.poll() is None else f"(status {proc.returncode})"))


def format_corunners(result: dict) -> str:
    lines = [f"# the server's kernels (cpu backend, device core {result['device_core']}) alone and beside a "
             f"{result['hog_size']} memory hog (write, read) or an L1 loop (cache), {result['rounds']} rounds of "
             f"{result['iterations']} per kernel",
             f"{'kernel':10s} {'beside':20s} {'p50':>9s} {'p99':>9s} {'max':>9s} {'p50/alone':>9s} "
             f"{'p99/alone':>9s}  (us)"]
    for kernel, k in result["kernels"].items():
        for name, c in k["configurations"].items():
            lines.append(f"{kernel:10s} {name:20s} {c['p50_us']:9.1f} {c['p99_us']:9.1f} {c['max_us']:9.1f} "
                         f"{c['p50_vs_alone']:9.2f} {c['p99_vs_alone']:9.2f}")
    lines.append("# the hog moved (MB/s, median of the rounds): " +
                 ", ".join(f"{name} {mbs}" for name, mbs in result["hog_mb_per_s"].items()))
    return "\n".join(lines)


SBIN_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"
SERVER_NODE_ADDR, CLIENT_NODE_ADDR = "10.206.0.1", "10.206.0.2"
GATEWAY_ADDRESS = f"tcp:{SERVER_NODE_ADDR}:7411"


@contextlib.contextmanager
def node_pair():
    """Two network namespaces joined by a veth pair, as a server's node
    (SERVER_NODE_ADDR) and a client's (CLIENT_NODE_ADDR); removed after.
    Made as `rtaccel run` makes its nodes (core/netns.h)."""
    tag = f"rtaccel-bench-{os.getpid()}"
    server_ns, client_ns = f"{tag}-server", f"{tag}-client"
    made = []
    try:
        try:
            for ns in (server_ns, client_ns):
                _core.netns_add(ns)
                made.append(ns)
            _core.veth_join((server_ns, f"rtg{os.getpid()}a", f"{SERVER_NODE_ADDR}/24"),
                            (client_ns, f"rtg{os.getpid()}b", f"{CLIENT_NODE_ADDR}/24"))
        except RuntimeError as err:  # the set-up's, not the caller's
            raise AccelError(f"{err} (two nodes on one machine need root and iproute2)") from None
        yield server_ns, client_ns
    finally:
        for ns in made:
            _core.netns_del(ns)


def run_remote_bench(what: str, extra: list[str], levels: int = 4, fifo: bool = True) -> dict:
    """Runs one benchmark of ``rtaccel-accel-bench`` as a client on another
    node: the server (cpu backend) in one namespace with its gateway on tcp,
    the client in another, through rtaccel_client_connect("tcp:...")."""
    device, client = default_cores()
    with node_pair() as (server_ns, client_ns), tempfile.NamedTemporaryFile(
            "w", prefix="rtaccel-policy-", suffix=".yaml") as policy:
        policy.write("allow:\n  - {user: root, priorities: [0, 99]}\n"
                     f"  - {{peer: {CLIENT_NODE_ADDR}, priorities: [0, 99]}}\n")
        policy.flush()
        server_args = ["--device", str(device), "--server-core", str(client), "--levels", str(levels),
                       "--policy", policy.name, "--listen", GATEWAY_ADDRESS]
        if not fifo:
            server_args.append("--no-fifo")
        with private_server(server_args, prefix=("ip", "netns", "exec", server_ns)):
            cmd = [str(binary("rtaccel-accel-bench")), what, "--socket", GATEWAY_ADDRESS, "--json", *extra]
            if fifo:
                cmd = ["chrt", "-f", "50", *cmd]
            proc = subprocess.run(["ip", "netns", "exec", client_ns, "taskset", "-c", str(client), *cmd],
                                  capture_output=True, text=True, env=dict(os.environ, PATH=SBIN_PATH))
    if proc.returncode != 0:
        raise AccelError(f"rtaccel-accel-bench {what} (remote) failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def run_dds_roundtrip(size: int, samples: int) -> dict:
    """A Cyclone DDS request of `size` bytes and its reply between two
    namespaces (rtaccel-dds-bench roundtrip); what PAAM's remote path paid."""
    proc = subprocess.run([str(binary("rtaccel-dds-bench")), "roundtrip", "--sizes", str(size),
                           "--samples", str(samples), "--rate", "10gbit"], capture_output=True, text=True,
                          env=dict(os.environ, PATH=SBIN_PATH + ":" + os.environ.get("PATH", "")))
    if proc.returncode != 0:
        raise AccelError(f"rtaccel-dds-bench roundtrip: {(proc.stdout + proc.stderr).strip()}")
    return json.loads(proc.stdout)["sizes"][0]


# rtaccel's goal for the server at scale: the p99 overhead per request with
# many clients over many buckets at most twice the one-client p99.
SCALE_GOAL = 2.0


def overhead_at_scale(runs: list, clients: list[int], buckets: list[int], rounds: int, wait: str,
                      requests: int, kernel_us: int, fifo: bool = True) -> dict:
    """request-overhead at every shape of CLIENTS x BUCKETS after the
    one-client baseline, in ROUNDS interleaved rounds, on each path of RUNS
    ((name, run_bench or run_remote_bench)), all against a server of the
    same levels; each row's p99 as a ratio of its path's baseline p99."""
    levels = max(4, *buckets)
    extra = ["--wait", wait, "--requests", str(requests), "--kernel-us", str(kernel_us),
             "--clients", ",".join(map(str, clients)), "--buckets", ",".join(map(str, buckets)),
             "--rounds", str(rounds)]
    rows = []
    for path, run in runs:
        result = run("request-overhead", extra, levels=levels, fifo=fifo)
        baseline = result["rows"][0]
        for row in result["rows"]:
            rows.append({"path": path, **row, "p99_vs_baseline": round(row["p99_us"] / baseline["p99_us"], 2)})
    largest = max((row for row in rows if row["path"] == "local"), key=lambda row: (row["clients"], row["buckets"]))
    return {"version": 1, "benchmark": "request-overhead-scale", "wait": wait, "kernel_us": float(kernel_us),
            "levels": levels, "rounds": rounds, "rows": rows,
            "goal": {"path": "local", "clients": largest["clients"], "buckets": largest["buckets"],
                     "p99_vs_baseline": largest["p99_vs_baseline"], "limit": SCALE_GOAL,
                     "met": largest["p99_vs_baseline"] <= SCALE_GOAL}}


def format_overhead_at_scale(result: dict) -> str:
    """The rows of `rtaccel bench request-overhead --clients ... --buckets ...`."""
    lines = [f"# request overhead per request (dispatch + end -> resumed), wait={result['wait']}, "
             f"busy({result['kernel_us']:.0f} us) kernels, a server of {result['levels']} levels, "
             f"{result['rounds']} rounds",
             f"{'path':7s} {'clients':>7s} {'buckets':>7s} {'req/s':>8s} {'p50':>8s} {'p99':>8s} "
             f"{'max':>8s} {'dispatch p99':>12s} {'resume p99':>10s} {'p99/base':>8s}  (us)"]
    for row in result["rows"]:
        ph = row["phases"]
        lines.append(f"{row['path']:7s} {row['clients']:7d} {row['buckets']:7d} {row['requests_per_s']:8.0f} "
                     f"{row['p50_us']:8.2f} {row['p99_us']:8.2f} {row['max_us']:8.2f} "
                     f"{ph['dispatch']['p99_us']:12.2f} {ph['end_to_resumed']['p99_us']:10.2f} "
                     f"{row['p99_vs_baseline']:8.2f}")
    g = result["goal"]
    lines.append(f"# goal: p99 at {g['clients']} clients over {g['buckets']} buckets at most "
                 f"{g['limit']:.0f}x the one-client p99: {g['p99_vs_baseline']:.2f}x, "
                 f"{'met' if g['met'] else 'NOT met'}")
    return "\n".join(lines)


def format_overhead_paths(result: dict) -> str:
    """The local, remote and DDS paths of `rtaccel bench request-overhead --remote`."""
    local = result["local"]
    lines = [f"# request overhead (round trip minus the kernel), wait={local['wait']}, "
             f"{local['requests']} requests of busy({local['kernel_us']:.0f} us); "
             "the PAAM paper's remote path over DDS: 198-391 us",
             f"{'path':48s} {'p50':>9s} {'p99':>9s} {'max':>9s}  (us)"]
    rows = [("local client (shared memory)", local),
            (f"remote client (tcp between namespaces, gateway)", result["remote"])]
    for name, r in rows:
        lines.append(f"{name:48s} {r['p50_us']:9.2f} {r['p99_us']:9.2f} {r['max_us']:9.2f}")
    if "dds" in result:
        d = result["dds"]
        lines.append(f"{'Cyclone DDS round trip, ' + str(d['size']) + ' B (no kernel)':48s} "
                     f"{d['dds_rtt_p50_us']:9.2f} {d['dds_rtt_p99_us']:9.2f} {d['dds_rtt_max_us']:9.2f}")
    names = {"client_to_gateway": "client -> the gateway's link", "gateway_wake": "-> the gateway's thread",
             "gateway_to_start": "-> the kernel's start", "kernel": "kernel",
             "end_to_reply": "-> the response sent", "reply_to_client": "-> the client's link",
             "client_wake": "-> the client"}
    lines.append("# the remote round trip, hop by hop")
    for key, label in names.items():
        h = result["remote"]["hops"][key]
        lines.append(f"  {label:46s} {h['p50_us']:9.2f} {h['p99_us']:9.2f} {h['max_us']:9.2f}")
    return "\n".join(lines)


def format_overhead(result: dict) -> str:
    gap = f", {result['gap_us']:.0f} us apart" if result.get("gap_us") else ""
    idle = f", beside {result['idle']} idle registrations" if result.get("idle") else ""
    lines = [f"# request overhead, wait={result['wait']}, {result['requests']} requests of "
             f"busy({result['kernel_us']:.0f} us){gap}{idle}; the PAAM paper reports 198-391 us"]
    names = {"submit_to_start": "submit -> worker start", "kernel": "kernel",
             "end_to_resumed": "kernel end -> resumed", "overhead": "overhead (round trip - kernel)"}
    for key, label in names.items():
        s = result["phases"][key]
        lines.append(f"{label:32s} p50 {s['p50_us']:9.2f}  p99 {s['p99_us']:9.2f}  "
                     f"max {s['max_us']:9.2f} us")
    return "\n".join(lines)


# rtaccel-accel-bench registrations: 99 chains of eight callbacks.
REGISTRATIONS_MOST = 792


def format_registrations(result: dict) -> str:
    lines = ["# registrations, eight callbacks to a critical chain: the admission of the N-th's chain "
             "(the analysis of every chain admitted) and the median of its chain's registrations",
             f"{'callbacks':>9s} {'chains':>6s} {'admit':>10s} {'median':>10s}  (ms)"]
    for at in result["at"]:
        lines.append(f"{at['callbacks']:9d} {at['chains']:6d} {at['admit_ms']:10.3f} {at['register_ms']:10.3f}")
    lines.append(f"# the server let go of the {result['release_of']} registrations of a client that left "
                 f"in {result['release_ms']:.1f} ms")
    return "\n".join(lines)


def format_preemption(result: dict) -> str:
    lines = [f"# cross-bucket preemption delay, {result['iterations']} "
             "iterations per kernel (the PAAM paper's Table I: GPU, 15-41 us mean)",
             f"{'kernel':10s} {'samples':>7s} {'mean':>9s} {'p99':>9s} {'max':>9s}  (us)"]
    for name, k in result["kernels"].items():
        lines.append(f"{name:10s} {k['samples']:7d} {k['delay_mean_us']:9.2f} "
                     f"{k['delay_p99_us']:9.2f} {k['delay_max_us']:9.2f}")
    return "\n".join(lines)
