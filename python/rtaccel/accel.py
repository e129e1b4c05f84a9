"""The accelerator server from Python: start a private ``rtaccel-server`` and run
its benchmarks (``rtaccel bench``).

The server and the benchmark client are ``lib/rtaccel-server`` and
``lib/rtaccel-accel-bench`` beside this package (built by CMake);
``RTACCEL_LIB_DIR`` overrides the folder.
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import tempfile
from pathlib import Path

LIB_DIR = Path(os.environ.get("RTACCEL_LIB_DIR", Path(__file__).resolve().parent / "lib"))


class AccelError(Exception):
    """A server or benchmark that could not run, with the reason."""


def binary(name: str) -> Path:
    """The path of one of rtaccel's programs beside this package."""
    path = LIB_DIR / name
    if not path.exists():
        raise AccelError(f"{path} is missing: build rtaccel first (make build)")
    return path


def default_cores() -> tuple[int, int]:
    """(device core, client core): the last core is the device, the client the first."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        raise AccelError("the cpu backend needs two cores: one is the device")
    return cores[-1], cores[0]


@contextlib.contextmanager
def private_server(args: list[str], startup_s: float = 10.0):
    """Runs rtaccel-server on a temporary socket for the duration of the block;
    yields the socket path. The server says when it serves through its
    readiness pipe (--ready-fd); it is stopped (SIGTERM, then SIGKILL) after."""
    with tempfile.TemporaryDirectory(prefix="rtaccel-") as tmp:
        path = os.path.join(tmp, "server.sock")
        ready_r, ready_w = os.pipe()
        try:
            proc = subprocess.Popen([str(binary("rtaccel-server")), "--socket", path, *args,
                                     "--ready-fd", str(ready_w)], pass_fds=(ready_w,),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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
        cmd = [str(binary("rtaccel-accel-bench")), what, "--socket", path, "--json", *extra]
        if fifo:
            cmd = ["chrt", "-f", "50", *cmd]
        proc = subprocess.run(["taskset", "-c", str(client), *cmd], capture_output=True, text=True)
    if proc.returncode != 0:
        raise AccelError(f"rtaccel-accel-bench {what} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def format_overhead(result: dict) -> str:
    lines = [f"# request overhead, wait={result['wait']}, {result['requests']} requests of "
             f"busy({result['kernel_us']:.0f} us); the PAAM paper reports 198-391 us"]
    names = {"submit_to_start": "submit -> worker start", "kernel": "kernel",
             "end_to_resumed": "kernel end -> resumed", "overhead": "overhead (round trip - kernel)"}
    for key, label in names.items():
        s = result["phases"][key]
        lines.append(f"{label:32s} p50 {s['p50_us']:9.2f}  p99 {s['p99_us']:9.2f}  "
                     f"max {s['max_us']:9.2f} us")
    return "\n".join(lines)


def format_preemption(result: dict) -> str:
    lines = [f"# cross-bucket preemption delay, {result['iterations']} "
             "iterations per kernel (the PAAM paper's Table I: GPU, 15-41 us mean)",
             f"{'kernel':10s} {'samples':>7s} {'mean':>9s} {'p99':>9s} {'max':>9s}  (us)"]
    for name, k in result["kernels"].items():
        lines.append(f"{name:10s} {k['samples']:7d} {k['delay_mean_us']:9.2f} "
                     f"{k['delay_p99_us']:9.2f} {k['delay_max_us']:9.2f}")
    return "\n".join(lines)
