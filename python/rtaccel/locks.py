"""Front end of the lock layer: run programs under the pthread interposer
(`rtaccel shim`), summarise its traces (`rtaccel lockstat`) and show the
locking delays it fixes (`rtaccel lockdemo`).

The interposer is ``lib/librtaccel_shim.so`` beside this package (built by
CMake); ``RTACCEL_SHIM_LIB`` overrides its path.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from rtaccel import inputs, shape
from rtaccel.errors import Error

LIB_DIR = Path(__file__).resolve().parent / "lib"
LOCKDEMO_SCENARIOS = (
    ("reader-starvation", ("", "phase-fair")),
    ("writer-starvation", ("", "phase-fair")),
    ("mutex-inversion", ("", "pi")),
    ("rwlock-inversion", ("", "phase-fair", "boost")),
)


class LockToolError(Error):
    """A program missing or failed (runtime), or a trace file or folder that
    cannot be used (bad_input)."""


# What RTACCEL_SHIM may name (shim.c reads them).
SHIM_MODES = ("trace", "pi", "phase-fair", "boost")


def shim_library() -> Path:
    path = Path(os.environ.get("RTACCEL_SHIM_LIB", LIB_DIR / "librtaccel_shim.so"))
    if not path.is_file():
        raise LockToolError(f"{path}: interposer not built (run `make build`)")
    return path


def lockdemo_binary() -> Path:
    path = LIB_DIR / "rtaccel-lockdemo"
    if not path.is_file():
        raise LockToolError(f"{path}: not built (run `make build`)")
    return path


def shim_environment(modes: list[str], out_dir: str | None = None, ceiling: int = 0,
                     base: dict | None = None, bwlock: str | None = None,
                     bwlock_threshold: int = 0) -> dict:
    """Environment that runs a program under the interposer in the given modes;
    with ``bwlock``, the program holds that bandwidth lock (threshold
    ``bwlock_threshold`` MB/s) during its GPU segments."""
    env = dict(os.environ if base is None else base)
    _preload_first(env, shim_library())
    env["RTACCEL_SHIM"] = ",".join(modes)
    if out_dir is not None:
        env["RTACCEL_SHIM_OUT"] = str(Path(out_dir).resolve())
    if ceiling:
        env["RTACCEL_SHIM_CEILING"] = str(ceiling)
    if bwlock:
        env["RTACCEL_SHIM_BWLOCK"] = f"{bwlock}:{bwlock_threshold}"
    return env


# ELF's program types and the program header of a dynamic linker.
ELF_EXEC, ELF_DYN, PT_INTERP = 2, 3, 3


def why_not_preloaded(command: list[str], env: dict) -> str | None:
    """Why the dynamic linker will not load the interposer into COMMAND, as
    PATH in ENV finds it, where it can tell: a program linked statically
    has no dynamic linker, and one that gains privileges as it starts
    (set-user-ID, set-group-ID, file capabilities) has LD_PRELOAD ignored.
    None otherwise (a script: its interpreter is what runs)."""
    path = shutil.which(command[0], path=env.get("PATH"))
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            static = _elf_without_interpreter(f)
        st = os.stat(path)
        nosuid = bool(os.statvfs(path).f_flag & os.ST_NOSUID)
        capabilities = _has_xattr(path, "security.capability")
    except OSError:
        return None
    if static:
        return "is linked statically, so no dynamic linker loads the interposer into it"
    if not nosuid and ((st.st_mode & stat.S_ISUID and st.st_uid != os.geteuid())
                       or (st.st_mode & stat.S_ISGID and st.st_gid != os.getegid())
                       or (capabilities and os.geteuid() != 0)):
        return ("gains privileges as it starts (set-user-ID, set-group-ID or file capabilities), "
                "so the dynamic linker ignores LD_PRELOAD for it")
    return None


def _elf_without_interpreter(f) -> bool:
    """Whether F is an ELF program with no program interpreter (PT_INTERP):
    linked statically, static-pie too."""
    head = f.read(64)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return False
    order = "<" if head[5] == 1 else ">"
    # Where e_phoff is, and how wide, and where e_phentsize and e_phnum are.
    phoff_at, phoff_kind, counts_at = (32, "Q", 54) if head[4] == 2 else (28, "I", 42)
    (e_type,) = struct.unpack_from(order + "H", head, 16)
    (phoff,) = struct.unpack_from(order + phoff_kind, head, phoff_at)
    phentsize, phnum = struct.unpack_from(order + "HH", head, counts_at)
    if e_type not in (ELF_EXEC, ELF_DYN) or phnum == 0 or phentsize < 4:
        return False
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    if len(table) < phentsize * phnum:
        return False
    return all(struct.unpack_from(order + "I", table, i * phentsize)[0] != PT_INTERP for i in range(phnum))


def _has_xattr(path: str, name: str) -> bool:
    try:
        os.getxattr(path, name)
        return True
    except OSError:
        return False


def _preload_first(env: dict, lib: Path) -> None:
    """Puts LIB first in ENV's LD_PRELOAD. The dynamic linker splits that
    list at spaces as well as colons: a LIB in a folder whose path has a
    space (a virtualenv under "My Projects") goes in by its name, that
    folder first in LD_LIBRARY_PATH, which is split at colons and
    semicolons alone. tools/exec/main.cc does the same for `rtaccel run
    --shim`."""
    path = str(lib)
    if ":" in path or (" " in path and ";" in path):
        raise LockToolError(f"{path}: the interposer's path has a character the dynamic linker splits "
                            "LD_PRELOAD at (':', or ' ' with ';'): install rtaccel where its path has none")
    if " " in path:
        folders = env.get("LD_LIBRARY_PATH", "")
        env["LD_LIBRARY_PATH"] = str(lib.parent) + (":" + folders if folders else "")
        path = lib.name
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = path + (":" + preload if preload else "")


TRACE_BASE = "rtaccel-shim"
RUN_FILE = "run.json"


def traces_in(folder: Path) -> list[Path]:
    """The per-process summaries in one run's folder."""
    return sorted(f for f in folder.glob("rtaccel-shim.*.json") if not f.name.endswith(".trace.json"))


def new_run_folder(command: list[str], out: str | None) -> Path:
    """The folder one traced run writes: OUT, which must hold no other run's
    traces, or a new one under rtaccel-shim/ named after the time and the
    program (rtaccel-shim/20261124-101502-xz/, -2 after it in the same
    second), so that runs never mix."""
    if out is not None:
        folder = Path(out)
        if folder.exists() and not folder.is_dir():
            raise LockToolError(f"--out {out}: not a folder", bad_input=True)
        if folder.is_dir() and (traces_in(folder) or (folder / RUN_FILE).exists()):
            raise LockToolError(f"--out {out}: holds the traces of another run; name a new "
                                f"folder, or leave --out out (each run gets its own folder "
                                f"under {TRACE_BASE}/)", bad_input=True)
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    program = "".join(c if c.isalnum() or c in "._-" else "_" for c in Path(command[0]).name)
    Path(TRACE_BASE).mkdir(exist_ok=True)
    for n in range(1, 1000):
        folder = Path(TRACE_BASE) / (f"{stamp}-{program}" + (f"-{n}" if n > 1 else ""))
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise LockToolError(f"{TRACE_BASE}/: no free name for a run folder")


def run_under_shim(command: list[str], modes: list[str], out_dir: str | Path | None, ceiling: int = 0,
                   bwlock: str | None = None, bwlock_threshold: int = 0) -> int:
    """Runs command under the interposer and waits for it, as run_program
    does; returns its exit status, or -N where signal N ended it (as
    subprocess says it). With "trace" among the modes, out_dir is the
    run's folder (new_run_folder): the traces of every process of the run,
    and run.json (the command, the modes, when it started, its exit status,
    128+N for signal N as a shell shows it)."""
    if not command:
        raise LockToolError("no command given (rtaccel shim [OPTIONS] -- CMD ...)", bad_input=True)
    env = shim_environment(modes, out_dir, ceiling, bwlock=bwlock,
                           bwlock_threshold=bwlock_threshold)
    started = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    try:
        status = run_program(command, env)
    except OSError as err:
        status = cannot_start(command, err)
    if "trace" in modes and out_dir is not None:
        run = {"format": "rtaccel-shim-run", "version": 1, "command": command, "modes": modes,
               "started": started, "exit_status": 128 - status if status < 0 else status}
        (Path(out_dir) / RUN_FILE).write_text(json.dumps(run, indent=1) + "\n")
    return status


def cannot_start(command: list[str], err: OSError) -> int:
    """Says why COMMAND could not start; the status a shell gives then."""
    if isinstance(err, FileNotFoundError):
        print(f"rtaccel shim: {command[0]}: command not found", file=sys.stderr)
        return 127
    print(f"rtaccel shim: {command[0]}: {err.strerror}", file=sys.stderr)
    return 126


# What a launcher or a user sends a program to end or steer it: ros2
# launch's SIGINT, a service manager's SIGTERM, a log rotation's SIGHUP or
# SIGUSR1.
PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)
# si_code of a signal the kernel sent: a terminal's Ctrl-C, Ctrl-\ or
# hang-up, which go to its whole foreground process group.
_SI_KERNEL = 0x80


def run_program(command: list[str], env: dict) -> int:
    """Runs COMMAND (looked up in PATH) as a shell would, and waits for it:
    it has this process's descriptors (a shell's `3<file`, `<(cmd)`, a
    service manager's sockets), and the signals this process was started
    with, SIGPIPE and SIGXFSZ at their default. A signal of PASSED_ON that a
    process sends to this one goes on to COMMAND, which ends as it chooses;
    one from a terminal reached COMMAND already, in the same process group,
    and is not sent twice. Returns COMMAND's exit status, or -N where signal
    N ended it. Raises OSError where it could not start."""
    waited = {signal.SIGCHLD, *(sig for sig in PASSED_ON if signal.getsignal(sig) != signal.SIG_IGN)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    try:
        pid = os.posix_spawnp(command[0], command, env, setsigmask=mask,
                              setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
        while True:
            info = signal.sigwaitinfo(waited)
            if info.si_signo != signal.SIGCHLD:
                if info.si_code != _SI_KERNEL:
                    os.kill(pid, info.si_signo)
                continue
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
    finally:
        # What came after COMMAND ended had no one to go to: unblocked, it
        # would end this process before it says how COMMAND ended.
        while signal.sigtimedwait(waited, 0) is not None:
            pass
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _run_started(folder: Path) -> str:
    """When the run in folder started (run.json), for ordering runs."""
    try:
        return str(json.loads((folder / RUN_FILE).read_text()).get("started", ""))
    except (OSError, ValueError, AttributeError):
        return ""


def resolve_run(path: Path) -> tuple[Path, str | None]:
    """The run folder that PATH names: PATH itself when it holds traces; the
    newest run under it when it holds run folders (rtaccel-shim/), with a
    line that says which one was taken."""
    if traces_in(path):
        return path, None
    runs = [d for d in path.iterdir() if d.is_dir() and traces_in(d)]
    if not runs:
        return path, None
    runs.sort(key=lambda d: (_run_started(d), d.stat().st_mtime, d.name))
    note = None
    if len(runs) > 1:
        note = (f"# {runs[-1]}: the newest of {len(runs)} runs in {path} "
                f"(name another run's folder to read it)")
    return runs[-1], note


# What format_lockstat reads of an interposer's report (rtaccel.shape).
_LOCKSTAT_SHAPE = {
    "pid": int, "command": shape.optional([str]), "modes": shape.optional(dict), "wait_events": shape.optional(int),
    "locks": [{"id": int, "kind": str, "acquisitions": int, "contended": int, "wait_ns_total": shape.NUMBER,
               "wait_ns_max": shape.NUMBER, "hold_ns_max": shape.NUMBER, "created_at": str, "created_by": str,
               "destroyed_while_held": shape.optional(bool)}],
    "patterns": shape.optional([{"function": str, "caller": str, "count": int, "ops": [{"op": str, "lock": int}]}]),
    "cuda": shape.optional(shape.nullable({
        "static_runtime": shape.optional([str]),
        "calls": shape.optional([{"api": str, "calls": int, "errors": int, "total_ns": shape.NUMBER,
                                  "max_ns": shape.NUMBER, "lock_ops": int, "locks": [int]}]),
        "segments": shape.optional({"count": shape.optional(int), "total_ns": shape.optional(shape.NUMBER),
                                    "max_ns": shape.optional(shape.NUMBER)})})),
}


def load_lockstat(paths: list[str]) -> list[dict]:
    """Reads interposer summaries: files, a run's folder, or a folder of runs
    (rtaccel-shim/: its newest run)."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            run, note = resolve_run(p)
            if note:
                print(note, file=sys.stderr)
            files += traces_in(run)
        else:
            files.append(p)
    if not files:
        raise LockToolError("no rtaccel-shim.*.json files found in " + ", ".join(paths), bad_input=True)
    reports = []
    for f in files:
        try:
            data = json.loads(inputs.read_text(f))
        except (OSError, UnicodeDecodeError) as err:
            raise LockToolError(f"{f}: cannot read: {err}", bad_input=True) from None
        except json.JSONDecodeError as err:
            raise LockToolError(f"{f}:{err.lineno}: not valid JSON: {err.msg}", bad_input=True) from None
        if not isinstance(data, dict) or data.get("format") != "rtaccel-lockstat":
            raise LockToolError(f"{f}: not an rtaccel lockstat file", bad_input=True)
        if data.get("version") != 1:
            raise LockToolError(f"{f}: unsupported lockstat version {data.get('version')}", bad_input=True)
        if why := shape.error(data, _LOCKSTAT_SHAPE):
            raise LockToolError(f"{f}: not an rtaccel lockstat file: {why}", bad_input=True)
        data["_file"] = str(f)
        reports.append(data)
    return reports


def _us(ns: float) -> str:
    return f"{ns / 1000.0:.1f}"


def format_lockstat(reports: list[dict], top: int = 10) -> str:
    lines = []
    for rep in reports:
        cmd = shlex.join(rep.get("command", []))  # an argument with a space reads as one
        modes = [k for k, v in rep.get("modes", {}).items() if v]
        lines.append(f"# pid {rep['pid']}: {cmd}  (modes: {', '.join(modes) or 'trace only'})")
        locks = sorted(rep["locks"], key=lambda l: (l["wait_ns_total"], l["acquisitions"]),
                       reverse=True)
        lines.append(f"# {len(locks)} locks used, {rep.get('wait_events', 0)} contended waits; "
                     f"top {min(top, len(locks))} by total wait")
        lines.append(f"{'id':>4} {'kind':<6} {'acquired':>10} {'contended':>10} {'ratio':>6} "
                     f"{'wait_total_us':>14} {'wait_max_us':>12} {'hold_max_us':>12}  created at")
        for l in locks[:top]:
            ratio = l["contended"] / l["acquisitions"] if l["acquisitions"] else 0.0
            lines.append(f"{l['id']:>4} {l['kind']:<6} {l['acquisitions']:>10} "
                         f"{l['contended']:>10} {ratio:>6.3f} {_us(l['wait_ns_total']):>14} "
                         f"{_us(l['wait_ns_max']):>12} {_us(l['hold_ns_max']):>12}  "
                         f"{l['created_at']} ({l['created_by'].replace('_', ' ')})")
        for l in rep["locks"]:
            if l.get("destroyed_while_held"):
                lines.append(f"# warning: {l['kind']} {l['id']} (created at {l['created_at']}) was "
                             "destroyed while held or waited for, which POSIX leaves undefined "
                             "(glibc and the shim let it pass)")
        lines.append("# lock pattern per function (calls that took locks, in order)")
        # Patterns are recorded per call site; merge equal sequences per function.
        merged: dict[tuple, dict] = {}
        for p in rep.get("patterns", []):
            key = (p["function"], tuple((o["op"], o["lock"]) for o in p["ops"]))
            if key in merged:
                merged[key]["count"] += p["count"]
                merged[key]["callers"].add(p["caller"])
            else:
                merged[key] = dict(p, callers={p["caller"]})
        by_function: dict[str, list[dict]] = {}
        for p in merged.values():
            by_function.setdefault(p["function"], []).append(p)
        ranked = sorted(by_function.items(), key=lambda kv: -sum(p["count"] for p in kv[1]))
        for function, patterns in ranked[:top]:
            total = sum(p["count"] for p in patterns)
            callers = sorted(set().union(*(p["callers"] for p in patterns)))
            lines.append(f"{function}  ({total} calls; called from {', '.join(callers[:3])})")
            for p in sorted(patterns, key=lambda p: -p["count"])[:3]:
                ops = " -> ".join(f"{o['op']}#{o['lock']}" for o in p["ops"])
                lines.append(f"    {p['count']:>8} x  {ops}")
        lines.extend(_format_cuda(rep.get("cuda")))
        lines.append("")
    return "\n".join(lines)


def _format_cuda(cuda: dict | None) -> list[str]:
    """The interposed CUDA calls: how often, how long, which locks inside."""
    if not cuda:
        return []
    lines = []
    for path in cuda.get("static_runtime", []):
        lines.append(f"# {path}: CUDA runtime linked in statically, its calls are not seen")
    calls = sorted(cuda.get("calls", []), key=lambda c: -c["calls"])
    if not calls:
        return lines
    seg = cuda.get("segments", {})
    lines.append(f"# CUDA calls; {seg.get('count', 0)} GPU segments, "
                 f"{_us(seg.get('total_ns', 0))} us in all, longest {_us(seg.get('max_ns', 0))} us")
    lines.append(f"{'api':<30} {'calls':>8} {'errors':>7} {'mean_us':>9} {'max_us':>10} "
                 f"{'locks/call':>10}  locks")
    for c in calls:
        n = max(c["calls"], 1)
        mean = c["total_ns"] / n
        per_call = c["lock_ops"] / n
        locks = ", ".join(f"#{i}" for i in c["locks"]) or "-"
        lines.append(f"{c['api']:<30} {c['calls']:>8} {c['errors']:>7} {_us(mean):>9} "
                     f"{_us(c['max_ns']):>10} {per_call:>10.2f}  {locks}")
    return lines


def run_lockdemo(duration_ms: int, hog_ms: int, rounds: int) -> list[dict]:
    """Runs every scenario without and with the fixes; one result dict per run."""
    binary = str(lockdemo_binary())
    results = []
    for scenario, modes in LOCKDEMO_SCENARIOS:
        for mode in modes:
            cmd = [binary, scenario, "--duration-ms", str(duration_ms), "--hog-ms", str(hog_ms),
                   "--rounds", str(rounds)]
            env = shim_environment([mode] if mode else [])
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            if proc.returncode == 77:
                results.append({"scenario": scenario, "mode": mode or "default",
                                "skipped": proc.stderr.strip()})
                continue
            if proc.returncode != 0:
                raise LockToolError(f"{scenario} ({mode or 'default'}) failed: {proc.stderr}")
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return results


def format_lockdemo(results: list[dict]) -> str:
    lines = ["# worst wait of the victim thread, without and with rtaccel's fixes",
             f"{'scenario':<20} {'mode':<12} {'samples':>8} {'max_wait_us':>12} "
             f"{'p50_wait_us':>12}"]
    for r in results:
        if "skipped" in r:
            lines.append(f"{r['scenario']:<20} {r['mode']:<12} skipped: {r['skipped']}")
            continue
        lines.append(f"{r['scenario']:<20} {r['mode']:<12} {r['samples']:>8} "
                     f"{r['max_wait_us']:>12.1f} {r['p50_wait_us']:>12.1f}")
    return "\n".join(lines)


__all__ = ["LockToolError", "shim_library", "shim_environment", "run_under_shim",
           "load_lockstat", "format_lockstat", "run_lockdemo", "format_lockdemo"]
