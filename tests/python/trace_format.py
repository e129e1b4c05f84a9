"""A strict check of the Chrome/Perfetto trace-event JSON that rtaccel writes.

Perfetto's trace processor would be the reader to use, but it is fetched
from the network when first used, which CI cannot; so this checks what the
format's specification (the "Trace Event Format" document) requires and what
Perfetto's JSON importer relies on: the object form, every event's phase and
the fields that phase needs, numbers that are numbers, complete events with
a duration, async begins and ends that pair up, counters with numeric
values, and flow events whose every step lies inside a slice of its thread,
with one start and one finish per flow."""

import math

PHASES = {"X", "B", "E", "i", "I", "C", "M", "b", "e", "n", "s", "t", "f"}
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index", "process_labels"}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check(doc) -> list:
    """Every problem found in DOC (a parsed trace), as sentences; [] when none."""
    problems = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not the JSON object form: no traceEvents list"]
    if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        problems.append(f"displayTimeUnit {doc['displayTimeUnit']!r} is neither ms nor ns")
    slices = {}  # (pid, tid) -> [(ts, end)]
    asyncs = {}  # (cat, name, id) -> open begins
    flows = {}   # id -> phases in order, with where
    for n, e in enumerate(doc["traceEvents"]):
        where = f"event {n} ({e.get('name')!r})" if isinstance(e, dict) else f"event {n}"
        if not isinstance(e, dict):
            problems.append(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if ph not in PHASES:
            problems.append(f"{where}: unknown phase {ph!r}")
            continue
        if not isinstance(e.get("name"), str):
            problems.append(f"{where}: no name")
        if not isinstance(e.get("pid"), int):
            problems.append(f"{where}: pid is not an integer")
        if "tid" in e and not isinstance(e["tid"], int):
            problems.append(f"{where}: tid is not an integer")
        if ph == "M":
            if e.get("name") not in METADATA or not isinstance(e.get("args"), dict):
                problems.append(f"{where}: metadata without a known name and args")
            continue
        if not _number(e.get("ts")):
            problems.append(f"{where}: ts {e.get('ts')!r} is not a finite number")
            continue
        if "args" in e and not isinstance(e["args"], dict):
            problems.append(f"{where}: args is not an object")
        if ph == "X":
            if not _number(e.get("dur")) or e["dur"] < 0:
                problems.append(f"{where}: complete event without a duration >= 0")
                continue
            slices.setdefault((e["pid"], e.get("tid", 0)), []).append((e["ts"], e["ts"] + e["dur"]))
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(_number(v) for v in args.values()):
                problems.append(f"{where}: counter without numeric values")
        elif ph in ("i", "I"):
            if e.get("s", "t") not in ("g", "p", "t"):
                problems.append(f"{where}: instant with scope {e.get('s')!r}")
        elif ph in ("b", "e", "n"):
            if "id" not in e:
                problems.append(f"{where}: async event without an id")
                continue
            key = (e.get("cat"), e.get("name"), e["id"])
            if ph == "b":
                asyncs[key] = asyncs.get(key, 0) + 1
            elif ph == "e":
                if not asyncs.get(key):
                    problems.append(f"{where}: async end without its begin")
                else:
                    asyncs[key] -= 1
        elif ph in ("s", "t", "f"):
            if "id" not in e:
                problems.append(f"{where}: flow event without an id")
                continue
            flows.setdefault(e["id"], []).append((ph, e["pid"], e.get("tid", 0), e["ts"], where))
    for key, left in asyncs.items():
        if left:
            problems.append(f"async {key}: {left} begin(s) without an end")
    for fid, steps in flows.items():
        phases = [s[0] for s in steps]
        if phases.count("s") != 1 or phases.count("f") != 1 or phases[0] != "s" or phases[-1] != "f":
            problems.append(f"flow {fid}: not one start, steps, one finish ({''.join(phases)})")
        for ph, pid, tid, ts, where in steps:
            # A flow step binds to the slice that encloses it on its thread.
            if not any(a <= ts <= b for a, b in slices.get((pid, tid), [])):
                problems.append(f"{where}: flow {fid} step at {ts} is in no slice of pid {pid} tid {tid}")
        times = [s[3] for s in steps]
        if times != sorted(times):
            problems.append(f"flow {fid}: steps out of time order")
    return problems
