"""Running workloads for real: ``rtaccel run``, ``compare``, ``report``,
``calibrate`` and the demo.

The run itself is ``lib/rtaccel-exec`` (C++): it forks one process per executor,
starts a private ``rtaccel-server`` under the paam policy, and writes
DIR/summary.json, DIR/trace.json (Perfetto) and DIR/latency.csv. This module
starts it, reads and compares what it wrote, and draws the plots.
"""
from __future__ import annotations

import json
import os
import platform
import resource
import signal
import socket
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

from rtaccel import _core, accel, inputs, shape
from rtaccel.errors import Error

POLICIES = ("ros2", "picas", "paam")
# summary.json's contract: every field the runner writes, and its type.
SUMMARY_SCHEMA = Path(__file__).parent / "schemas" / "summary.schema.json"


class RunError(Error):
    """A run that could not be made (runtime), or a result folder or
    calibration that cannot be read (bad_input)."""


# --- calibration -------------------------------------------------------------

def calibration_path() -> Path:
    """Where `rtaccel calibrate` writes this machine's overheads and where
    `rtaccel analyze` and `rtaccel run` read them: $RTACCEL_CALIBRATION, else
    $XDG_CONFIG_HOME/rtaccel/calibration.json (~/.config by default)."""
    env = os.environ.get("RTACCEL_CALIBRATION")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "rtaccel" / "calibration.json"


def load_calibration() -> dict | None:
    """This machine's calibration, or None when there is none. A file that is
    there but unreadable is an error: silently ignoring it would give bounds
    below the machine's real overheads."""
    path = calibration_path()
    try:
        path.stat()
    except FileNotFoundError:
        return None
    except OSError as err:  # a HOME that is not this user's, for one
        raise RunError(f"{path}: cannot be read ({err.strerror}); set RTACCEL_CALIBRATION, or HOME "
                       "to a folder of this user's") from err
    try:
        doc = json.loads(inputs.read_text(path))
        eps, kappa = float(doc["epsilon_us"]), float(doc["kappa_us"])
        jitter = float(doc["release_jitter_us"])
        kernel = float(doc.get("link_kernel_ns_per_kb", 0))  # absent from older files
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise RunError(f"{path}: not a calibration written by `rtaccel calibrate` ({err}); "
                       "run it again or remove the file", bad_input=True) from err
    # Up to a second each (a kernel's cost up to a second per KiB): beyond
    # that, or not a number, it is not a measurement of this machine.
    for name, value in (("epsilon_us", eps), ("kappa_us", kappa), ("release_jitter_us", jitter),
                        ("link_kernel_ns_per_kb", kernel / 1000)):
        if not 0 <= value <= 1e6:
            raise RunError(f"{path}: {name} is {doc[name]}, not an overhead between 0 and a second; "
                           "run `rtaccel calibrate` again or remove the file", bad_input=True)
    return {"path": str(path), "epsilon_us": eps, "kappa_us": kappa, "release_jitter_us": jitter,
            "link_kernel_ns_per_kb": kernel}


def link_kernel_ns_per_kb(total_mib: int = 256) -> float:
    """The kernel's CPU time per KiB that crosses a TCP connection on this
    machine: TOTAL_MIB sent over loopback, in 1 MiB writes, and the system
    time of the sending and the receiving thread per KiB. On loopback, as over a
    veth pair between namespaces, the receive path runs in softirqs within
    those threads, so their time is the kernel's whole work for the data:
    the system calls' copies and the protocol. A link costs more where a
    device or a shaper adds to it, which a workload declares
    (kernel_ns_per_kb)."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    cpu_ns = [0, 0]
    received = [0]

    def thread_ns() -> int:  # in the kernel: the program's own time is not the link's
        return int(resource.getrusage(resource.RUSAGE_THREAD).ru_stime * 1e9)

    def drain():
        conn, _ = listener.accept()
        start = thread_ns()
        with conn:
            while chunk := conn.recv(1 << 20):
                received[0] += len(chunk)
        cpu_ns[1] = thread_ns() - start

    reader = threading.Thread(target=drain)
    reader.start()
    block = bytes(1 << 20)
    with socket.create_connection(("127.0.0.1", port)) as out:
        start = thread_ns()
        for _ in range(total_mib):
            out.sendall(block)
        cpu_ns[0] = thread_ns() - start
    reader.join()
    listener.close()
    return sum(cpu_ns) / (received[0] / 1024)


# The calibration's second series as a periodic callback's requests come:
# milliseconds apart, so that the server's worker has stopped polling and its
# core gone idle, and each kernel milliseconds long, so that the client's
# core has gone idle too by its end (here 1.03-1.6x the p99 of 100 us
# kernels, in 4 of 4 interleaved rounds).
CALIBRATION_GAP_US = 10000
CALIBRATION_KERNEL_US = 5000


def measure_calibration(requests: int = 5000, iterations: int = 100) -> dict:
    """Measures epsilon (server overhead per request: the suspended round trip
    minus the kernel, p99, the larger of requests back to back and requests
    of CALIBRATION_KERNEL_US, CALIBRATION_GAP_US apart), kappa (cross-bucket
    preemption delay, the worst kernel's p99) and the release jitter (how late a SCHED_FIFO timer
    wakes, p99) with the accelerator-server benchmarks; `calibrate` writes
    them."""
    overhead = accel.run_bench("request-overhead", ["--wait", "suspend", "--requests", str(requests)])
    # Back to back, the worker is still polling and both cores are awake; a
    # run's requests, milliseconds apart, meet them asleep (here 2-4x the
    # overhead).
    gapped = accel.run_bench("request-overhead", ["--wait", "suspend", "--requests", str(max(requests // 16, 50)),
                                                  "--gap-us", str(CALIBRATION_GAP_US),
                                                  "--kernel-us", str(CALIBRATION_KERNEL_US)])
    preemption = accel.run_bench("preemption", ["--iterations", str(iterations)])
    timer = accel.run_bench("timer-latency", ["--iterations", str(max(requests // 2, 100))])
    eps = max(overhead["phases"]["overhead"]["p99_us"], gapped["phases"]["overhead"]["p99_us"])
    kappa = max(k["delay_p99_us"] for k in preemption["kernels"].values())
    jitter = timer["p99_us"]
    kernel = max(link_kernel_ns_per_kb() for _ in range(3))
    doc = {
        "format_version": 1,
        "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": platform.node(),
        "epsilon_us": round(eps, 1),
        "kappa_us": round(kappa, 1),
        "release_jitter_us": round(jitter, 1),
        "link_kernel_ns_per_kb": round(kernel),
        "measured": {"request_overhead": overhead["phases"]["overhead"],
                     "request_overhead_with_gaps": dict(gapped["phases"]["overhead"], gap_us=gapped["gap_us"],
                                                        kernel_us=gapped["kernel_us"]),
                     "timer_latency": timer,
                     "preemption": preemption["kernels"]},
    }
    return doc


def calibrate(requests: int = 5000, iterations: int = 100) -> dict:
    """This machine's overheads (measure_calibration), written where every
    later `analyze` and `run` reads them."""
    doc = measure_calibration(requests, iterations)
    path = calibration_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Whole or not at all: the bounds of every later run read it.
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(partial, path)
    doc["path"] = str(path)
    return doc


# --- running -----------------------------------------------------------------

# Said once per process: a demo's runs share the machine.
_said_uncalibrated = False


# The signals by which a program ends on a fault of its own.
_FAULTS = {signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}


def exec_options() -> list[dict]:
    """rtaccel-exec's options, the one table its parser is made from
    (src/exec/run_options.h), in its usage's order: name, short, value
    (None: a flag), default, repeated, for_users (False: what rtaccel itself
    gives it) and help."""
    return _core.run_options()


def exec_argv(**options) -> list[str]:
    """rtaccel-exec's command line for OPTIONS, named as in its table with
    '_' for '-': a flag by True (where the table has --X and --no-X, X by
    True or False), a value by its text (str() of it), a repeated option by
    a list; None or an empty list leaves it out. In the table's order.
    ValueError for a name the table lacks."""
    table = {spec["name"].replace("-", "_"): spec for spec in exec_options()}
    unknown = [name for name in options if name not in table]
    if unknown:
        raise ValueError(f"rtaccel-exec has no option --{unknown[0].replace('_', '-')}")
    argv = []
    for dest, spec in table.items():
        value = options.get(dest)
        if value is None or value == [] or value == ():
            continue
        if spec["value"] is None:
            if value is True:
                argv.append(f"--{spec['name']}")
            elif value is False and f"no_{dest}" in table:
                argv.append(f"--no-{spec['name']}")
            continue
        for each in (value if spec["repeated"] else [value]):
            argv += [f"--{spec['name']}", str(each)]
    return argv


def run(workload: str, policy: str = "paam", duration_s: float = 10.0, out: str = "out", *,
        progress: bool = True, calibration: bool | dict = True, walks: list[dict] | tuple = (),
        flow_control: bool = True, fail_links: list[str] | tuple = (), **options) -> int:
    """Runs rtaccel-exec; returns its exit status (0, or 130 when interrupted:
    the results up to then are written). Ctrl-C reaches rtaccel-exec too; it
    stops the executors and writes its results, which this waits for.
    OPTIONS: rtaccel-exec's, as exec_argv names them (socket, work_fraction,
    gang, isolation, best_effort, shim, trace_events, ...). WALKS: another
    run's summary.json walks. CALIBRATION: this machine's (True), none
    (False), or one measured for this run (measure_calibration). RunError
    where rtaccel-exec was killed."""
    global _said_uncalibrated
    options.update(policy=policy, duration=duration_s, out=out)
    progress = progress and not options.get("quiet")
    options["quiet"] = not progress or None
    if not flow_control:
        options["no_flow_control"] = True
    options["fail_link"] = [*options.get("fail_link", []), *fail_links]
    # another run's "walks": the same work as that run
    options["walk"] = [*options.get("walk", []),
                       *(f"{w['working_set_kb']}:{w['pattern']}:{w['ns_per_line']}" for w in walks)]
    cal = calibration if isinstance(calibration, dict) else load_calibration() if calibration else None
    if calibration and not cal and progress and not _said_uncalibrated:
        # A bound with a smaller release jitter or overhead than the
        # machine's can be broken by the machine alone.
        _said_uncalibrated = True
        print(f"rtaccel run: this machine has no calibration at {calibration_path()}: the bounds take the "
              "workload's overheads (`rtaccel calibrate` measures them in seconds)", file=sys.stderr)
    if cal:
        options.update(epsilon_floor_us=cal["epsilon_us"], kappa_floor_us=cal["kappa_us"],
                       jitter_floor_us=cal["release_jitter_us"],
                       link_kernel_floor_ns_per_kb=int(cal["link_kernel_ns_per_kb"]))
    cmd = [str(accel.binary("rtaccel-exec")), workload, *exec_argv(**options)]
    # SIGTERM (kill, timeout, a service manager) and a hang-up (the terminal
    # or ssh session of a long run gone) end the run as Ctrl-C does: passed
    # on, and this returns once the runner has written the results, so that
    # what comes after (a script's `rtaccel report`) finds them. Not a
    # hang-up this command ignores (nohup). A terminal's Ctrl-Z does not
    # stop this command either: the run goes on (its runner says why), and
    # a shell that took this job for stopped would leave it to report into
    # the next prompt. Taken before the runner starts: one that comes while
    # it starts is passed on once it has.
    proc = None
    pending = []

    def pass_on(signum, _frame):
        if proc is None:
            pending.append(signum)
        else:
            proc.send_signal(signum)

    main = threading.current_thread() is threading.main_thread()
    passed_on = [sig for sig in (signal.SIGTERM, signal.SIGHUP) if signal.getsignal(sig) != signal.SIG_IGN]
    previous = {sig: signal.signal(sig, pass_on) for sig in passed_on} if main else {}
    try:
        proc = subprocess.Popen(cmd, preexec_fn=accel.stop_with_parent, env=_environment())
        for signum in pending:
            proc.send_signal(signum)
        # Ignored once the runner has started: it would inherit it.
        if main:
            previous[signal.SIGTSTP] = signal.signal(signal.SIGTSTP, signal.SIG_IGN)
        while True:
            try:
                status = proc.wait()
                if status < 0:
                    try:
                        killer = signal.Signals(-status).name
                    except ValueError:
                        killer = f"signal {-status}"
                    why = ("a fault in rtaccel: what it said last is above" if -status in _FAULTS
                           else "the OOM killer? `dmesg` says" if -status == signal.SIGKILL
                           else "sent by another program")
                    raise RunError(f"rtaccel-exec was killed by {killer} and wrote no results to {out} ({why}); "
                                   "the next run removes what it left behind")
                return status
            except KeyboardInterrupt:
                # The terminal sent SIGINT to rtaccel-exec as well; if not (a
                # signal to this process alone), pass it on.
                proc.send_signal(signal.SIGINT)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def _environment() -> dict:
    """rtaccel-exec's environment: this one, with the folder of this
    installation's `rtaccel` last on the PATH, so that `--best-effort
    'rtaccel membench ...'` finds it also where sudo or a bare shell left a
    virtual environment off the PATH. Last: a PATH that has one wins."""
    env = dict(os.environ)
    for folder in (Path(sys.argv[0]).parent, Path(sys.executable).parent):
        if os.access(folder / "rtaccel", os.X_OK) and (folder / "rtaccel").is_file():
            env["PATH"] = os.pathsep.join([env.get("PATH", os.defpath), str(folder)])
            break
    return env


# What the readers of a run's summary (compare, report, demo) take as given
# (rtaccel.shape).
_FIRST_LAST = {"first": int, "last": int}
_SUMMARY_SHAPE = {
    "format_version": int, "policy": str, "workload": {"name": str}, "duration_s": shape.NUMBER,
    "realtime": shape.optional(bool), "critical_bounds_held": shape.optional(shape.nullable(bool)),
    "failed": shape.optional(shape.nullable(str)), "interrupted": shape.optional(bool),
    "chains": [{
        "chain": str, "critical": bool, "count": int, "deadline_misses": int, "drops": int,
        "link_losses": shape.optional(int), "deadline_us": shape.NUMBER, "wcrt_us": shape.nullable(shape.NUMBER),
        "p50_us": shape.nullable(shape.NUMBER), "p99_us": shape.nullable(shape.NUMBER),
        "max_us": shape.nullable(shape.NUMBER), "bound_held": shape.nullable(bool),
        "over_bound": shape.optional(shape.nullable(int)), "no_bound": shape.optional(shape.nullable(str)),
        "explained_by": shape.optional([str]), "unexplained": shape.optional(int),
        "unchecked": shape.optional(int)}],
    "links": shape.optional([{"link": str, "flow_control": shape.optional(bool),
                              "topics": [{"lost": int, "first_loss_s": shape.nullable(shape.NUMBER)}]}]),
    "best_effort": shape.optional([{"command": str, "log": str, "ended": shape.nullable(str),
                                    "ended_s": shape.nullable(shape.NUMBER),
                                    "stopped": shape.optional([{"process": str, "pid": int, "from_s": shape.NUMBER,
                                                                "until_s": shape.nullable(shape.NUMBER)}]),
                                    "stops_not_kept": shape.optional(int),
                                    "stopped_s": shape.optional(shape.NUMBER)}]),
    "other_runs": shape.optional([{"runner_pid": int, "first_seen_s": shape.NUMBER,
                                   "last_seen_s": shape.NUMBER}]),
    # A process never sampled (it ended first) has no figures.
    "resources": shape.optional([{"process": str, "samples": int, "descriptors": shape.optional(_FIRST_LAST),
                                  "rss_kb": shape.optional(_FIRST_LAST), "private_kb": shape.optional(_FIRST_LAST),
                                  "peak_kb": shape.optional(int)}]),
    "assumptions": shape.optional({
        "trace_filled": shape.optional(shape.nullable({"of": str, "at_s": shape.NUMBER, "events": int})),
        "callbacks": shape.optional([{"over": int}])}),
    "walks": shape.optional([{"working_set_kb": int, "pattern": str, "ns_per_line": shape.NUMBER}]),
}


def load_summary(folder: str) -> dict:
    path = Path(folder) / "summary.json"
    try:
        doc = json.loads(inputs.read_text(path))
    except (OSError, ValueError) as err:
        raise RunError(f"{path}: not the result of `rtaccel run` ({err})", bad_input=True) from err
    if isinstance(doc, dict) and doc.get("format_version", 1) != 1:
        why = f"it is of format {json.dumps(doc['format_version'])[:20]}, and this rtaccel reads format 1"
    else:
        why = shape.error(doc, _SUMMARY_SHAPE)
    if why:
        raise RunError(f"{path}: not the result of `rtaccel run`: {why}", bad_input=True)
    doc["folder"] = str(folder)
    return doc


# The lines of a chain's explanation a run's table shows: the monitor puts
# the bound with the run's own times, then what the machine lost, then the
# overruns that can have added the most first.
EXPLANATIONS_SHOWN = 8


def _label(summary: dict) -> str:
    label = summary["policy"]
    links = summary.get("links") or []
    if links and not links[0].get("flow_control", True):
        label += "-nofc"  # topics between nodes without flow control
    if summary.get("isolation"):
        label += "+iso"  # the regulator and the bandwidth lock
    return label


def run_labels(summaries: list[dict]) -> list[str]:
    """Each run's label, numbered where runs share one (two paam runs, alone
    and beside a load, are 'paam#1' and 'paam#2'): every line, column and
    plot of a comparison names one run."""
    labels = [_label(s) for s in summaries]
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        if labels.count(label) > 1:
            seen[label] = seen.get(label, 0) + 1
            label = f"{label}#{seen[label]}"
        out.append(label)
    return out


def _f(value, width: int = 9, decimals: int = 2) -> str:
    """Microseconds as milliseconds; '-' for none."""
    return f"{'-':>{width}}" if value is None else f"{value / 1000.0:>{width}.{decimals}f}"


# A real-time process's resident memory may grow by this much in a run
# (KiB). They map and lock all they use before it starts, so more is memory
# first touched during the run: page faults in real-time work, or a leak.
# The runner is not one: its samples of the run grow with it. A run without
# real-time priority locks nothing either, and is not judged.
RESIDENT_GROWTH_KB = 1024


def resources_line(summary: dict) -> tuple[str, bool] | None:
    """What the run's processes held at its first sample and its last, and
    which of them grew: descriptors at all, a real-time process's resident
    memory by more than RESIDENT_GROWTH_KB. With it, whether any grew."""
    sampled = [p for p in summary.get("resources") or []
               if p.get("samples") and "descriptors" in p and "rss_kb" in p]
    if not sampled:
        return None
    total = {key: [sum(p.get(key, {}).get(when, 0) for p in sampled) for when in ("first", "last")]
             for key in ("descriptors", "rss_kb", "private_kb")}
    fds, rss, own = total["descriptors"], total["rss_kb"], total["private_kb"]
    line = (f"its {len(sampled)} processes held {fds[0]} open descriptors at the start and {fds[1]} "
            f"at the end, {rss[0] / 1024:.0f} and {rss[1] / 1024:.0f} MB resident")
    # Shared memory (the server's regions) is resident in each process that
    # maps it, so the sum counts it more than once; what is not shared is
    # each process's own. (A summary written before it was sampled lacks it.)
    if all("private_kb" in p for p in sampled):
        line += f" ({own[0] / 1024:.0f} and {own[1] / 1024:.0f} MB not shared)"
    # What the runner needed to write the results, after the last sample.
    peak = next((p["peak_kb"] for p in sampled if p["process"] == "runner" and "peak_kb" in p), None)
    if peak is not None:
        line += f"; the runner peaked at {peak / 1024:.0f} MB resident writing the results"
    fds_grew = [p for p in sampled if p["descriptors"]["last"] > p["descriptors"]["first"]]
    if fds_grew:
        line += "; descriptors GREW in " + ", ".join(
            f"{p['process']} ({p['descriptors']['first']} -> {p['descriptors']['last']})" for p in fds_grew)
    rss_grew = [p for p in sampled if summary.get("realtime", True) and p["process"] != "runner"
                and p["rss_kb"]["last"] - p["rss_kb"]["first"] > RESIDENT_GROWTH_KB]
    if rss_grew:
        line += "; resident memory GREW in " + ", ".join(
            f"{p['process']} ({p['rss_kb']['first'] / 1024:.1f} -> {p['rss_kb']['last'] / 1024:.1f} MB)"
            for p in rss_grew)
    return line, bool(fds_grew or rss_grew)


def bounds_exceeded(summaries: list[dict]) -> bool:
    """Whether a critical chain of a paam run with real-time priority went
    over its bound: the fact rtaccel run, compare, report and demo exit 1
    on. Only a paam run's bounds are its own (ros2 and picas are expected
    over them), and without real-time priority none apply."""
    return any(s["policy"] == "paam" and s.get("realtime", True) and s.get("critical_bounds_held") is False
               for s in summaries)


def format_compare(summaries: list[dict]) -> str:
    """The ratios of the critical chains' maxima of paam against the other
    policies, first: what a comparison is run for. Then a side-by-side
    table: per chain, each run's p50/p99/max (ms), misses and drops, beside
    the analysis bound; then what each run's monitor found."""
    names = []
    for s in summaries:
        for c in s["chains"]:
            if c["chain"] not in names:
                names.append(c["chain"])
    labels = run_labels(summaries)
    by = [{c["chain"]: c for c in s["chains"]} for s in summaries]
    runs = list(zip(labels, summaries))
    lines = ["# " + ", ".join(f"{label}: {s['folder']} ({s['workload']['name']}, "
                               f"{s['duration_s']:.0f} s)" for label, s in runs),
             "# latency in ms; bound: the PAAM analysis' worst-case response time"]
    lines += _ratio_lines(summaries)
    lines += _compare_table(names, labels, by)
    # The notes under the table, each kind over every run before the next.
    lines += _differing_bounds_lines(names, labels, by)
    lines += _cut_short_lines(runs)
    if any(c["bound_held"] is False for s in summaries if s["policy"] != "paam" for c in s["chains"]):
        lines.append("# '!': maximum above the bound; under ros2 and picas that is expected (the "
                     "bound is the paam system's)")
    lines += _beside_the_run_lines(runs)
    lines += _link_loss_lines(runs)
    for label, s in runs:
        said = resources_line(s)
        if said and (len(summaries) == 1 or said[1]):
            lines.append(f"# {label}: {said[0]}")
    # Why a chain has no bound, once: the analysis is the workload's.
    for name in names:
        why = next((b[name].get("no_bound") for b in by if name in b and b[name].get("no_bound")), None)
        if why:
            lines.append(f"# {name}: no bound: {why}")
    lines += _over_bound_lines(runs)
    lines += _verdict_lines(runs)
    return "\n".join(lines)


def _compare_table(names: list[str], labels: list[str], by: list[dict]) -> list[str]:
    """format_compare's table: its head, then a row per chain (of NAMES, in
    order) with each run's figures (BY: per run, its chains by name), '!'
    where a critical chain went over its bound."""
    # The chain column fits the longest name, so that no two rows read alike.
    rows = [(name, name if next((b[name]["critical"] for b in by if name in b), False) else name + " (be)")
            for name in names]
    first = max([18] + [len(shown) for _, shown in rows])
    head = f"{'chain':<{first}} {'bound':>9} "
    # each run's first column wide enough for its label
    widths = [max(10, len(label) + 4) for label in labels]
    for label, width in zip(labels, widths):
        head += f"| {label + ' p50':>{width}} {'p99':>8} {'max':>8} {'miss':>5} {'drop':>5} "
    lines = [head]
    for name, shown in rows:
        bound = next((b[name]["wcrt_us"] for b in by if name in b), None)
        row = f"{shown:<{first}} {_f(bound)} "
        for b, width in zip(by, widths):
            c = b.get(name)
            if c is None:
                row += f"| {'':>{width}} {'':>8} {'':>8} {'':>5} {'':>5} "
                continue
            over = c["bound_held"] is False and c["critical"]
            row += (f"| {_f(c['p50_us'], width)} {_f(c['p99_us'], 8)} {_f(c['max_us'], 8)}"
                    f"{'!' if over else ' '}{c['deadline_misses']:>4} "
                    f"{c['drops'] + c.get('link_losses', 0):>5} ")
        lines.append(row)
    return lines


def _differing_bounds_lines(names: list[str], labels: list[str], by: list[dict]) -> list[str]:
    """A line per chain whose runs' bounds differ: the table's column shows
    the first run's."""
    lines = []
    for name in names:
        # Runs of one workload can have different bounds (isolation adds the
        # regulator's term; another calibration): each judges its own.
        bounds = [(label, b[name]["wcrt_us"]) for label, b in zip(labels, by) if name in b]
        if len({bound for _, bound in bounds}) > 1:
            each = ", ".join(f"{_f(bound).strip()} ({label})" for label, bound in bounds)
            lines.append(f"# {name}: the runs' bounds differ: {each}; the column gives the first, "
                         f"'!' each run's own")
    return lines


def _cut_short_lines(runs: list[tuple[str, dict]]) -> list[str]:
    """Per run (label, summary) interrupted or ended by a failure: when, so
    that its figures are read as of the time before."""
    lines = []
    for label, s in runs:
        if s.get("interrupted"):
            lines.append(f"# {label}: the run was interrupted {s['duration_s']:.1f} s into it; its figures "
                         "are of the time before")
        if s.get("failed"):
            lines.append(f"# {label}: THE RUN ENDED AT {s['duration_s']:.1f} s: {s['failed']}; its figures "
                         "are of the time before")
    return lines


def _beside_the_run_lines(runs: list[tuple[str, dict]]) -> list[str]:
    """Per run (label, summary), what ran beside its workload on its cores:
    its best-effort programs (what they moved, how they ended, their stops)
    and other runs under way at the same time."""
    lines = []
    for label, s in runs:
        moved = best_effort_mb_per_s(s)
        if moved is not None:
            lines.append(f"# {label}: best-effort programs moved {moved:.0f} MB/s")
        for other in s.get("other_runs", []):
            lines.append(f"# {label}: another run was under way beside it (its runner: pid {other['runner_pid']}, "
                         f"seen {other['first_seen_s']:.0f} to {other['last_seen_s']:.0f} s into the run): the two "
                         "shared the cores")
        for be in s.get("best_effort") or []:
            if be.get("ended"):
                at = be["ended_s"]
                when = "" if at is None else f" {at:.1f} s into the run" if at > 0 else " before the run began"
                lines.append(f"# {label}: best-effort program '{be['command']}' {be['ended']}{when}")
            said = stops_line(be, s["duration_s"])
            if said:
                lines.append(f"# {label}: best-effort program '{be['command']}' {said}")
    return lines


def _link_loss_lines(runs: list[tuple[str, dict]]) -> list[str]:
    """Per run (label, summary) and link that lost messages: how many, from
    when (the table counts them as drops)."""
    lines = []
    for label, s in runs:
        for link in s.get("links") or []:
            lost = sum(t["lost"] for t in link["topics"])
            if lost:
                first = min((t["first_loss_s"] for t in link["topics"] if t["first_loss_s"] is not None),
                            default=None)
                since = "" if first is None else f" from {first:.1f} s on"
                lines.append(f"# {label}: link {link['link']} lost {lost} messages{since} "
                             f"(counted in drop; see {s['folder']}/summary.json)")
    return lines


def _over_bound_lines(runs: list[tuple[str, dict]]) -> list[str]:
    """Per run (label, summary) with real-time priority, each critical chain
    over its bound: how far, and what the run's monitor found broken in the
    time of its instances over it."""
    lines = []
    for label, s in runs:
        # Without real-time priority the bounds do not apply: nothing over
        # them is judged, only counted (_verdict_lines).
        if not s.get("realtime", True):
            continue
        for c in s["chains"]:
            if c["critical"] and c["bound_held"] is False:
                lines.append(f"# {label}: {c['chain']}: {_over_bound_text(c)}{_verdict_text(s, c)}")
                # What the run's monitor found broken in their time, the
                # most that can have added first; the rest are in the file.
                why = c.get("explained_by", [])
                verdict = why[-1:] if c.get("unexplained") else []
                why = why[:len(why) - len(verdict)]
                shown = why if len(why) <= EXPLANATIONS_SHOWN + 1 else why[:EXPLANATIONS_SHOWN]
                lines += [f"#     {line}" for line in shown]
                if len(shown) < len(why):
                    lines.append(f"#     and {len(why) - len(shown)} more that can have added less "
                                 f"({s['folder']}/summary.json, the chain's explained_by)")
                lines += [f"#     {line}" for line in verdict]
    return lines


def _verdict_lines(runs: list[tuple[str, dict]]) -> list[str]:
    """Per run (label, summary), last: whether its figures could be checked
    to its end, and its verdict: the bounds do not apply (no real-time
    priority), or a paam run's critical chains held their bounds, or went
    over them where nothing the run saw explains it."""
    lines = []
    for label, s in runs:
        filled = (s.get("assumptions") or {}).get("trace_filled")
        if filled:
            lines.append(f"# {label}: the trace of {filled['of']} filled {filled['at_s']:.1f} s into the run "
                         f"({filled['events']} events): the run checked callbacks, kernels and hops, and "
                         "instances over their bound, up to then only (--trace-events keeps more)")
        if not s.get("realtime", True):
            over = [f"{c['chain']}: {_over_bound_text(c)}" for c in s["chains"]
                    if c["critical"] and c["bound_held"] is False]
            lines.append(f"# {label}: executors ran without SCHED_FIFO (refused): "
                         "no real-time priority, the bounds do not apply to this run"
                         + (f" ({'; '.join(over)})" if over else ""))
        elif s["policy"] == "paam":
            if s.get("critical_bounds_held"):
                lines.append(f"# {label}: every critical chain's maximum is within its bound")
            elif any(c.get("unexplained", 0) for c in s["chains"] if c["critical"]):
                # The one finding that is rtaccel's fault, not the machine's.
                lines.append(f"# {label}: A CRITICAL CHAIN EXCEEDED ITS BOUND beyond what the "
                             "assumptions broken in its time explain: the analysis does not hold for "
                             "this run; that is a bug in rtaccel's analysis, please report it with "
                             f"{s['folder']}")
    return lines


def _over_bound_text(c: dict) -> str:
    """How far a chain over its bound went: "45 of 400 instances (11%) over
    its 13.1 ms bound, by up to 2.3 ms"."""
    over, count = c.get("over_bound"), c["count"]
    share = "" if over is None or not count else \
        f" ({'<1' if 0 < over < count / 100 else f'{100 * over / count:.0f}'}%)"
    by = "" if c["max_us"] is None or c["wcrt_us"] is None else f", by up to {_f(c['max_us'] - c['wcrt_us'], 0, 1)} ms"
    return (f"{'' if over is None else f'{over} of '}{count} instances{share} over its "
            f"{_f(c['wcrt_us'], 0, 1)} ms bound{by}")


def _verdict_text(summary: dict, c: dict) -> str:
    """What a paam run's monitor made of a chain's instances over its bound,
    after _over_bound_text; nothing for the other policies, whose runs the
    bound is not of (their explanations say so), or where no monitor ran."""
    if summary["policy"] != "paam" or "explained_by" not in c:
        return ""
    over, unchecked, unexplained = c.get("over_bound") or 0, c.get("unchecked", 0), c.get("unexplained", 0)
    late = f"; {unchecked} came after the trace filled, unchecked" if unchecked else ""
    if unexplained:
        return f"; {unexplained} with nothing broken in their time that explains them (below){late}"
    if over - unchecked <= 0:
        return late
    top = _top_cause(c["explained_by"], over - unchecked)
    return (f"; each had an assumption of the analysis broken in its time "
            f"({f'the most: {top}' if top else 'below'}){late}")


def _top_cause(explained_by: list[str], checked: int) -> str | None:
    """The overrun that can have added the most to a chain's instances over
    its bound: the first of the lines that end in what the monitor counts
    them of (" of the 45 over the bound"), after the lines of the run's
    own times and of what the machine lost, which do not. None where no
    line reads so."""
    of = f" of the {checked} over the bound"
    return next((line for line in explained_by if of in line), None)


def critical_ratios(summaries: list[dict]) -> dict:
    """For each critical chain: paam's maximum over each other policy's, in
    one set of runs (the paper reports -91% against ROS 2, -51% against PiCAS)."""
    # By label: a paam run with isolation is another row than one without.
    # Numbered where they repeat: of two paam runs, neither is 'the' paam.
    by = {label: {c["chain"]: c for c in s["chains"]} for label, s in zip(run_labels(summaries), summaries)}
    if "paam" not in by:
        return {}
    out = {}
    for name, c in by["paam"].items():
        if not c["critical"] or c["max_us"] is None:
            continue
        for other in ("ros2", "picas"):
            o = by.get(other, {}).get(name)
            if o and o["max_us"]:
                out.setdefault(name, {})[other] = c["max_us"] / o["max_us"] - 1.0
    return out


def _ratio_lines(summaries: list[dict]) -> list[str]:
    lines = []
    for name, vs in critical_ratios(summaries).items():
        parts = ", ".join(f"{r * 100:+.0f}% against {o}" for o, r in vs.items())
        lines.append(f"# {name}: paam maximum {parts}")
    return lines


def report(folders: list[str], out: str | None = None) -> tuple[str, list[str]]:
    """The comparison table and one CDF plot per chain (all runs on one plot,
    the analysis bound as a vertical line, as the PAAM paper's Fig. 9-11).
    Returns (table, PNG paths)."""
    import csv

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    summaries = [load_summary(f) for f in folders]
    out_dir = Path(out) if out else Path(folders[0]).resolve().parent / "report"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RunError(f"cannot write the plots into {out_dir}: {err.strerror or err}", bad_input=True) from None
    samples: list[dict[str, list[float]]] = []
    for f in folders:
        per: dict[str, list[float]] = {}
        try:
            with open(Path(f) / "latency.csv", newline="") as fh:
                for row in csv.DictReader(fh):
                    per.setdefault(row["chain"], []).append(float(row["latency_us"]) / 1000.0)
        except (OSError, KeyError, ValueError) as err:
            raise RunError(f"{f}/latency.csv: {err}", bad_input=True) from err
        samples.append(per)
    pngs = []
    chains = [c for c in summaries[0]["chains"]]
    for c in chains:
        name = c["chain"]
        fig, ax = plt.subplots(figsize=(6, 3.6))
        for label, per in zip(run_labels(summaries), samples):
            x = np.sort(np.array(per.get(name, [])))
            if x.size:
                ax.step(x, np.arange(1, x.size + 1) / x.size, where="post", label=label)
        if c["wcrt_us"] is not None:
            ax.axvline(c["wcrt_us"] / 1000.0, color="k", linestyle="--", label="analysis bound")
        ax.axvline(c["deadline_us"] / 1000.0, color="r", linestyle=":", label="deadline")
        ax.set_xlabel("end-to-end latency (ms)")
        ax.set_ylabel("CDF")
        ax.set_title(f"{summaries[0]['workload']['name']}: {name}"
                     + ("" if c["critical"] else " (best effort)"))
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        path = out_dir / f"cdf_{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        pngs.append(str(path))
    moved = [best_effort_mb_per_s(s) for s in summaries]
    if any(m is not None for m in moved):
        pngs.append(_plot_best_effort(summaries, moved, out_dir, plt))
    table = format_compare(summaries)
    (out_dir / "compare.txt").write_text(table + "\n")
    return table, pngs


def _plot_best_effort(summaries: list[dict], moved: list, out_dir: Path, plt) -> str:
    """What each run left the best-effort programs (MB/s) beside what it cost
    the critical chains (instances over their bounds, deadline misses, and
    callback instances over their WCETs): isolation's trade, one bar per run."""
    labels = run_labels(summaries)
    over = [sum(c.get("over_bound") or 0 for c in s["chains"] if c["critical"]) for s in summaries]
    misses = [sum(c["deadline_misses"] for c in s["chains"] if c["critical"]) for s in summaries]
    wcet = [sum(c["over"] for c in s.get("assumptions", {}).get("callbacks", [])) for s in summaries]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    left.bar(labels, [m or 0 for m in moved], color="tab:gray")
    left.set_ylabel("best-effort MB/s")
    x = range(len(labels))
    right.bar([i - 0.25 for i in x], over, width=0.25, label="critical chains over bound")
    right.bar(x, misses, width=0.25, label="critical deadline misses")
    right.bar([i + 0.25 for i in x], wcet, width=0.25, label="callbacks over their WCET")
    right.set_xticks(list(x), labels)
    right.set_ylabel("instances")
    right.legend(fontsize=8)
    for ax in (left, right):
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"{summaries[0]['workload']['name']}: best-effort throughput and what it cost")
    fig.tight_layout()
    path = out_dir / "best_effort.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def demo(workload: str, duration_s: float, out: str, progress: bool = True,
         best_effort: list[str] | tuple = (), isolation: bool = False,
         calibration: bool | dict = True) -> tuple[int, list[str]]:
    """The workload under ros2, picas and paam, one after the other, each
    beside the same BEST_EFFORT programs, and with ISOLATION once more under
    paam with the workload's isolation section (the others without it), with
    CALIBRATION as `run` takes it; returns (status, result folders)."""
    configs = [(policy, False) for policy in POLICIES] + ([("paam", True)] if isolation else [])
    folders: list[str] = []
    walks: list[dict] = []
    for policy, isolated in configs:
        folder = str(Path(out) / (policy + ("-isolation" if isolated else "")))
        # Every run walks its working sets at the first run's speeds: the
        # same work in each, whatever the memory of a shared host did
        # between them.
        status = run(workload, policy, duration_s, folder, progress=progress, best_effort=best_effort,
                     isolation=isolated if isolation else None, walks=walks, calibration=calibration)
        if status != 0:
            return status, folders
        if not folders:
            walks = load_summary(folder).get("walks", [])
        folders.append(folder)
    return 0, folders


# How tight rtaccel's bounds should be against what runs measure: at most
# this many times a critical chain's longest instance, and none over.
BOUND_GOAL_RATIO = 2.0


def why_not_here(workload) -> str | None:
    """Why WORKLOAD (a loaded one) cannot run on this machine as it is, or
    None: a cuda accelerator (the examples' cuda variant needs a GPU
    machine), nodes or an isolation section without root (network
    namespaces, the regulator)."""
    if "cuda" in workload.accelerator_backends:
        return "its accelerator is on the cuda backend: name it on a machine with a GPU"
    if os.geteuid() != 0 and workload.nodes:
        return "its nodes need network namespaces: root"
    if os.geteuid() != 0 and workload.isolation is not None:
        return "its isolation section needs the regulator: root"
    return None


def bounds_over_maxima(workloads: list[str], duration_s: float, out: str, progress: bool = True,
                       skip_unrunnable: bool = True) -> tuple[int, dict]:
    """Each workload run under paam for DURATION_S, one after the other, and
    each critical chain's bound against the longest instance the run
    measured; returns (status, result). With SKIP_UNRUNNABLE the workloads
    this machine cannot run are listed with the reason, not run."""
    results: list[dict] = []
    for workload in workloads:
        name = Path(workload).stem
        if skip_unrunnable and (why := why_not_here(_core.load_workload(workload))):
            results.append({"workload": workload, "name": name, "skipped": why})
            continue
        folder = str(Path(out) / name)
        status = run(workload, "paam", duration_s, folder, progress=progress)
        if status != 0:
            return status, {}
        summary = load_summary(folder)
        speed = (summary.get("assumptions") or {}).get("speed") or {}
        chains = []
        for c in summary["chains"]:
            if not c.get("critical") or not c.get("max_us"):
                continue
            bound = c.get("wcrt_us")  # None: the analysis found none
            chains.append({"chain": c["chain"], "bound_us": bound, "max_us": c["max_us"],
                           "bound_over_max": bound / c["max_us"] if bound else None, "instances": c["count"],
                           "over_bound": c.get("over_bound") or 0, "unexplained": c.get("unexplained", 0)})
        results.append({"workload": workload, "name": name, "folder": folder, "chains": chains,
                         "speed_slowest": speed.get("slowest"), "speed_p50": speed.get("p50")})
    ran = [r for r in results if "chains" in r]
    loose = [f"{r['name']}/{c['chain']}" for r in ran for c in r["chains"]
             if c["bound_over_max"] is None or c["bound_over_max"] > BOUND_GOAL_RATIO]
    violated = [f"{r['name']}/{c['chain']}" for r in ran for c in r["chains"] if c["over_bound"]]
    unexplained = sum(c["unexplained"] for r in ran for c in r["chains"])
    goal = {"limit_ratio": BOUND_GOAL_RATIO, "loose": loose, "violated": violated, "unexplained": unexplained,
            "met": bool(ran) and not loose and not violated}
    return 0, {"duration_s": duration_s, "workloads": results, "goal": goal}


def format_bounds_over_maxima(result: dict) -> str:
    lines = [f"# each workload under paam for {result['duration_s']:g} s; bound: the analysis' for the run, "
             "max: its longest instance",
             f"{'workload':28} {'chain':22} {'bound ms':>9} {'max ms':>9} {'bound/max':>9} {'over':>10} "
             f"{'unexplained':>11} {'slowest speed':>13}"]
    for r in result["workloads"]:
        if "skipped" in r:
            lines.append(f"{r['name']:28} left out: {r['skipped']}")
            continue
        slowest = "-" if r["speed_slowest"] is None else f"{r['speed_slowest']:.2f}"
        for c in r["chains"]:
            bound = "no bound" if c["bound_us"] is None else f"{c['bound_us'] / 1000:.2f}"
            ratio = "-" if c["bound_over_max"] is None else f"{c['bound_over_max']:.2f}"
            lines.append(f"{r['name']:28} {c['chain']:22} {bound:>9} {c['max_us'] / 1000:9.2f} {ratio:>9} "
                         f"{str(c['over_bound']) + ' of ' + str(c['instances']):>10} "
                         f"{c['unexplained']:11d} {slowest:>13}")
    goal = result["goal"]
    verdict = "met" if goal["met"] else "NOT met: " + "; ".join(
        part for part in (("looser than that or unbounded: " + ", ".join(goal["loose"])) if goal["loose"] else "",
                          ("over the bound: " + ", ".join(goal["violated"])) if goal["violated"] else "",
                          "nothing run" if not any("chains" in r for r in result["workloads"]) else "")
        if part)
    lines.append(f"# goal: every critical chain's bound at most {goal['limit_ratio']:g}x its maximum, and no "
                 f"instance over it: {verdict}; instances over a bound that the run does not explain: "
                 f"{goal['unexplained']}")
    return "\n".join(lines)


def best_effort_mb_per_s(summary: dict) -> float | None:
    """What the run's best-effort programs moved, summed, from the last JSON
    line of their logs (`rtaccel membench --json` prints one when stopped);
    None when none printed one."""
    total, found = 0.0, False
    for be in summary.get("best_effort") or []:
        try:
            total += float(json.loads(inputs.last_line(Path(summary["folder"]) / be["log"]))["mb_per_s"])
            found = True
        except (OSError, IndexError, ValueError, KeyError, TypeError):
            continue
    return total if found else None


def stops_line(program: dict, duration_s: float) -> str | None:
    """What a best-effort program's stopped processes took from the run
    ("had processes stopped for 3.0 s of the run, from 1.0 s on, ..."): the
    time while any was stopped (the runner's count of every stop, where the
    summary has it; else from the stops it kept); None where none was."""
    stops = sorted((stop["from_s"], duration_s if stop["until_s"] is None else stop["until_s"])
                   for stop in program.get("stopped") or [])
    if not stops:
        return None
    held = program.get("stopped_s")
    if held is None:  # a summary from before the runner counted it
        held, reach = 0.0, 0.0
        for start, end in stops:
            start = max(start, reach)
            if end > start:
                held += end - start
                reach = end
    count = len(stops) + program.get("stops_not_kept", 0)
    to_end = ", to its end" if any(stop["until_s"] is None for stop in program["stopped"]) else ""
    return (f"had processes stopped for {held:.1f} s of the run, from {stops[0][0]:.1f} s on{to_end} "
            f"({count} stop(s)): part or all of its load was absent meanwhile")
