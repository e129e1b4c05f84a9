"""RT-Gang's DNN experiment (the paper's Sec. V-C, Fig. 6) on this machine:
a small convolutional network's inference on the CPU with one ONNX Runtime
thread per core as the high-priority real-time task, a periodic BwWrite-like
task of one thread per core as the lower one, and two best-effort programs
(rtaccel-membench read over twice the LLC, memory-bound like the paper's lbm,
and the cache-resident one, CPU-bound like its cutcp). Three configurations
in one run: the network alone (solo), co-scheduled under plain SCHED_FIFO,
and co-scheduled under the gang lock. The result is the per-frame inference
time of each; ``rtaccel bench gang-dnn`` runs it.

The network's weights are made here from a fixed seed: the figures measure
the time of the operators, not what the network recognises.

ONNX Runtime makes its own worker threads, and rtaccel cannot make them gang
members. The thread that calls ``run()`` is, and holds the gang's job for the
whole inference, which keeps every lower gang out; the workers inherit its
SCHED_FIFO priority, so they preempt best-effort work. What they cannot do is
be parked by a higher gang: give an inference runtime's gang the highest
priority, as here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ._core import percentile

DNN_PRIORITY = 60
BWWRITE_PRIORITY = 50
UTILISATION = 0.45  # of the network per core, as the paper picks its period
BWWRITE_SHARE = 0.4  # of the BwWrite period spent writing, alone


class DnnBenchError(RuntimeError):
    pass


def _require_runtime():
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as err:
        raise DnnBenchError(f"the DNN experiment needs ONNX Runtime ({err}): "
                            "pip install onnxruntime onnx") from err


def make_model(path: Path, size: int = 128, seed: int = 1) -> None:
    """A small CNN (four 3x3 convolutions with ReLU, global pooling, a fully
    connected layer; about 0.35 GFLOP per frame at 128x128) saved as ONNX."""
    from onnx import TensorProto, helper, numpy_helper, save

    rng = np.random.default_rng(seed)
    nodes, weights = [], []
    layers = [(3, 32, 1), (32, 64, 2), (64, 64, 1), (64, 128, 2), (128, 128, 1)]
    x = "input"
    for i, (cin, cout, stride) in enumerate(layers):
        w = (rng.standard_normal((cout, cin, 3, 3)) / np.sqrt(cin * 9)).astype(np.float32)
        b = np.zeros(cout, np.float32)
        weights += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], kernel_shape=[3, 3],
                                      pads=[1, 1, 1, 1], strides=[stride, stride]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        x = f"r{i}"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"]))
    fc = (rng.standard_normal((layers[-1][1], 10)) / np.sqrt(layers[-1][1])).astype(np.float32)
    weights.append(numpy_helper.from_array(fc, "fc"))
    nodes.append(helper.make_node("MatMul", ["flat", "fc"], ["logits"]))
    graph = helper.make_graph(
        nodes, "rtaccel_small_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    save(model, str(path))


def _fifo(priority: int, cores=None) -> None:
    if cores is not None:
        os.sched_setaffinity(0, cores)
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))


# --- the tasks, each run as `python -m rtaccel.gang_dnn TASK ...` ------------

def dnn_task(model: str, threads: int, period_ms: float, seconds: float, lock: str | None) -> dict:
    """Periodic inference at SCHED_FIFO; per-frame times in ms. The workers
    are made by the session, after the thread became real-time, so they
    inherit its policy."""
    import onnxruntime as ort

    # One thread per core: ONNX Runtime's workers on all but the first, the
    # caller on the first. ONNX Runtime pins its workers itself, counting in
    # the caller's affinity when it makes them, so the caller is pinned only
    # afterwards; a worker that shares the caller's core runs after it, not
    # beside it (both are SCHED_FIFO), and frames take half as long again.
    cores = sorted(os.sched_getaffinity(0))[:threads]
    _fifo(DNN_PRIORITY)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if threads > 1:
        options.add_session_config_entry("session.intra_op_thread_affinities",
                                         ";".join(str(c + 1) for c in cores[1:]))
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Spinning workers would keep the cores from everything else between
    # frames, which is not what a periodic task may do.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    os.sched_setaffinity(0, {cores[0]})
    shape = session.get_inputs()[0].shape
    frame = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    gang = None
    if lock:
        from rtaccel.isolate import Gang
        gang = Gang(lock, "dnn", DNN_PRIORITY)
    for _ in range(5):  # warm-up: allocations and first-run costs
        session.run(None, {"input": frame})
    period = period_ms / 1000.0
    times, waits = [], []
    release = time.monotonic() + 0.05
    end = release + seconds
    while release < end:
        time.sleep(max(0.0, release - time.monotonic()))
        if gang:
            t0 = time.perf_counter()
            with gang.job():
                t1 = time.perf_counter()
                session.run(None, {"input": frame})
                t2 = time.perf_counter()
            waits.append((t1 - t0) * 1e3)
        else:
            t1 = time.perf_counter()
            session.run(None, {"input": frame})
            t2 = time.perf_counter()
        times.append((t2 - t1) * 1e3)
        release += period
        release = max(release, time.monotonic())  # an overrun shifts the next release
    return {"frame_ms": times, "wait_ms": waits}


def bwwrite_task(size: int, threads: int, period_ms: float, passes: int, seconds: float,
                 lock: str | None) -> dict:
    """Periodic writes over ``size`` bytes shared by ``threads`` threads (one
    per core, SCHED_FIFO), ``passes`` times a job. numpy's fill lets go of the
    interpreter lock, so the threads write at once."""
    import threading


    buf = np.zeros(size, np.uint8)
    chunk = size // threads
    jobs = [0] * threads
    start = time.monotonic() + 0.05

    def worker(i: int) -> None:
        _fifo(BWWRITE_PRIORITY, {i % os.cpu_count()})
        mine = buf[i * chunk:(i + 1) * chunk]
        gang = None
        if lock:
            from rtaccel.isolate import Gang
            gang = Gang(lock, "bwwrite", BWWRITE_PRIORITY)
        release = start
        while release < start + seconds:
            time.sleep(max(0.0, release - time.monotonic()))
            if gang:
                with gang.job():
                    for p in range(passes):
                        mine.fill(p & 0xFF)
            else:
                for p in range(passes):
                    mine.fill(p & 0xFF)
            jobs[i] += 1
            release = max(release + period_ms / 1000.0, time.monotonic())

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return {"jobs": jobs}


# --- the experiment -----------------------------------------------------------

def _llc_bytes() -> int:
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1)
        best = max(best, int(text.rstrip("KM")) * scale)
    return best or 8 << 20


def _task(args: list, timeout: float) -> dict:
    proc = subprocess.run([sys.executable, "-m", "rtaccel.gang_dnn", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode:
        raise DnnBenchError(f"the {args[0]} task failed: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout)


def _start_task(args: list) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rtaccel.gang_dnn", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _percentiles(values: list) -> dict:
    return {"min": min(values), "p50": percentile(values, 0.5), "p99": percentile(values, 0.99),
            "max": max(values)}


def run(out: Path, seconds: float = 10.0, threads: int | None = None, membench: str | None = None,
        llc: int | None = None) -> dict:
    """The three configurations one after the other; writes gang_dnn.json and
    the CDF plot into ``out`` and returns the result."""
    _require_runtime()
    from rtaccel import accel

    threads = threads or len(os.sched_getaffinity(0))
    llc = llc or _llc_bytes()
    out.mkdir(parents=True, exist_ok=True)
    model = out / "small_cnn.onnx"
    make_model(model)
    membench = membench or str(accel.binary("rtaccel-membench"))
    lock = f"dnn{os.getpid()}"

    # The network alone, back to back, fixes its period (45% of a core each).
    probe = _task(["dnn", model, threads, 1.0, 1.0, "-"], 120)["frame_ms"]
    frame_ms = percentile(probe, 0.5)
    period_ms = frame_ms / UTILISATION
    # BwWrite: 2 x LLC, a job writing for about 40% of its period alone.
    size = 2 * llc
    bw_period_ms = 2.2 * period_ms
    buf = np.zeros(size // threads, np.uint8)
    pass_ms = 1e9
    for _ in range(4):  # the fastest of a few passes, the first faults the pages in
        t0 = time.perf_counter()
        buf.fill(1)
        pass_ms = min(pass_ms, (time.perf_counter() - t0) * 1e3)
    del buf
    passes = max(1, round(BWWRITE_SHARE * bw_period_ms / pass_ms))

    result = {"threads": threads, "llc_bytes": llc, "frame_ms_alone_probe": frame_ms,
              "dnn_period_ms": period_ms, "bwwrite": {"size_bytes": size, "period_ms": bw_period_ms,
                                                       "passes": passes}, "configurations": {}}
    frames = {}
    for name in ("solo", "cosched", "gang"):
        use_lock = lock if name == "gang" else "-"
        others = []
        if name != "solo":
            others.append(_start_task(["bwwrite", size, threads, bw_period_ms, passes, seconds + 0.5,
                                       use_lock]))
            others += [subprocess.Popen([membench, "read", "--size", f"{size >> 10}K", "--duration",
                                         str(seconds + 1.0), "--json"], stdout=subprocess.PIPE, text=True),
                       subprocess.Popen([membench, "cache", "--duration", str(seconds + 1.0), "--json"],
                                        stdout=subprocess.PIPE, text=True)]
            time.sleep(0.3)  # the co-runners are running when the first frame is
        try:
            doc = _task(["dnn", model, threads, period_ms, seconds, use_lock], seconds + 120)
        finally:
            outputs = [p.communicate(timeout=seconds + 60)[0] for p in others]
            if name == "gang":
                from rtaccel.isolate import Gang
                Gang.unlink(lock)
        for p in others:
            if p.returncode:
                raise DnnBenchError(f"a co-runner ({' '.join(map(str, p.args[:4]))}) failed with {p.returncode}")
        config = {"frames": len(doc["frame_ms"]), "frame_ms": _percentiles(doc["frame_ms"])}
        if doc["wait_ms"]:
            config["wait_ms"] = _percentiles(doc["wait_ms"])
        if others:
            config["bwwrite_jobs"] = sum(json.loads(outputs[0])["jobs"])
            config["best_effort_mbps"] = {"read": json.loads(outputs[1])["mb_per_s"],
                                          "cache": json.loads(outputs[2])["mb_per_s"]}
        result["configurations"][name] = config
        frames[name] = doc["frame_ms"]
    (out / "gang_dnn.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "gang_dnn_frames.json").write_text(json.dumps(frames) + "\n")
    _plot(out, frames, threads)
    return result


def _plot(out: Path, frames: dict, threads: int) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"solo": "solo", "cosched": "co-scheduled (SCHED_FIFO)", "gang": "co-scheduled, gang lock"}
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for name, values in frames.items():
        x = np.sort(np.array(values))
        ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=labels[name])
    ax.set_xlabel("per-frame inference time (ms)")
    ax.set_ylabel("CDF")
    ax.set_title(f"small CNN, ONNX Runtime, {threads} threads", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "gang_dnn_cdf.png", dpi=110)
    plt.close(fig)


def format_result(result: dict) -> str:
    lines = [f"# {result['threads']} threads; network period {result['dnn_period_ms']:.1f} ms; "
             f"BwWrite over {result['bwwrite']['size_bytes'] >> 20} MiB every "
             f"{result['bwwrite']['period_ms']:.1f} ms",
             "# per-frame inference time, ms",
             f"{'configuration':<10} {'frames':>6} {'min':>8} {'p50':>8} {'p99':>8} {'max':>8}  best effort MB/s"]
    for name, c in result["configurations"].items():
        f = c["frame_ms"]
        be = c.get("best_effort_mbps")
        lines.append(f"{name:<10} {c['frames']:>6} {f['min']:>8.2f} {f['p50']:>8.2f} {f['p99']:>8.2f} "
                     f"{f['max']:>8.2f}  " + (f"read {be['read']:.0f}, cache {be['cache']:.0f}" if be else "-"))
    return "\n".join(lines)


def _main(argv: list) -> int:
    task, args = argv[0], argv[1:]
    lock = None if args[-1] == "-" else args[-1]
    if task == "dnn":
        doc = dnn_task(args[0], int(args[1]), float(args[2]), float(args[3]), lock)
    elif task == "bwwrite":
        doc = bwwrite_task(int(args[0]), int(args[1]), float(args[2]), int(args[3]), float(args[4]), lock)
    else:
        print(f"unknown task {task}", file=sys.stderr)
        return 2
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
