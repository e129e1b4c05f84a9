#!/usr/bin/env python3
"""One step of the GPU campaign, and the campaign's summary.

    record.py step DIR NAME TIMEOUT -- CMD ...
        runs CMD (a bash command line when it is one word) with its own time
        limit and writes DIR/NAME.step.json: the command, exit status, seconds,
        status (ok, skipped: exit 77, failed, timed out), the JSON objects CMD
        printed (each line that is one) and the ends of its output. Never
        fails itself: the campaign goes on whatever a step does.
    record.py summary DIR TITLE
        DIR/results.json (every step) and DIR/summary.md (a table of them)
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

TAIL = 4000


def json_objects(text: str) -> list:
    """Every line of TEXT that is a JSON object, and the whole of it if it is one."""
    found = []
    try:
        whole = json.loads(text)
        if isinstance(whole, (dict, list)):
            return [whole] if isinstance(whole, dict) else whole
    except ValueError:
        pass
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                found.append(json.loads(line))
            except ValueError:
                pass
    return found


def step(out: Path, name: str, timeout: float, cmd: list[str]) -> int:
    shell = len(cmd) == 1
    start = time.monotonic()
    # a session of its own: a timed-out step's children go with it
    proc = subprocess.Popen(cmd[0] if shell else cmd, shell=shell, executable="/bin/bash" if shell else None,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        rc = proc.returncode
        status = "ok" if rc == 0 else "skipped" if rc == 77 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        rc, status = None, "timed out"
    record = {
        "name": name, "command": cmd[0] if shell else " ".join(cmd), "status": status, "exit": rc,
        "seconds": round(time.monotonic() - start, 2), "timeout_s": timeout,
        "results": json_objects(stdout), "stdout_tail": stdout[-TAIL:], "stderr_tail": stderr[-TAIL:],
    }
    (out / f"{name}.step.json").write_text(json.dumps(record, indent=1))
    print(f"[{record['seconds']:7.1f} s] {name}: {status}", flush=True)
    return 0


def summary(out: Path, title: str) -> int:
    steps = [json.loads(p.read_text()) for p in sorted(out.glob("*.step.json"), key=os.path.getmtime)
]
    (out / "results.json").write_text(json.dumps(steps, indent=1))
    lines = [f"# {title}", "", "| step | status | s | first result or last line |", "|---|---|---|---|"]
    for s in steps:
        if s["results"]:
            what = json.dumps(s["results"][0])[:300]
        else:
            text = (s["stdout_tail"].strip() or s["stderr_tail"].strip()).splitlines()
            what = text[-1][:300] if text else ""
        lines.append(f"| {s['name']} | {s['status']} | {s['seconds']} | {what.replace('|', '/')} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 6 and argv[0] == "step" and argv[4] == "--":
        return step(Path(argv[1]), argv[2], float(argv[3]), argv[5:])
    if len(argv) == 3 and argv[0] == "summary":
        return summary(Path(argv[1]), argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
