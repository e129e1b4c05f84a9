"""A part of a run's timeline (OUT/trace.json), small enough for a browser.

Half an hour of the Autoware system writes a 760 MB trace; the Perfetto UI
in a browser holds about 2 GB at runtime, a few times a trace's size, and
fails on it. `rtaccel cut` writes the events of a time window, or of the
windows around the chain instances the monitor found over their bounds, as
a trace of their own.

trace.json has one event a line (as rtaccel run writes it), so that a cut
reads it an event at a time. A trace written whole on one line (by an
earlier runner) is read whole.
"""

from __future__ import annotations

import bisect
import json
import pathlib
from typing import Iterable, Iterator

from rtaccel import inputs
from rtaccel.errors import Error

# The runner's trace holds these phases: metadata (M), complete slices (X),
# counters (C), async slices (b ... e, one id each) and flows (s, t ... f,
# one id each). Other programs' traces merged into it may hold instants (i).
FLOW = {"s", "t", "f"}
SCALAR = (str, int, float, type(None))


def _checked(event) -> dict:
    """EVENT if it has the shape a cut reads; ValueError saying what not."""
    if not isinstance(event, dict):
        raise ValueError("not an object")
    for key in ("ts", "dur"):
        if key in event and (not isinstance(event[key], (int, float)) or isinstance(event[key], bool)):
            raise ValueError(f"its {key} is not a number")
    for key in ("ph", "cat", "name", "id", "pid"):
        if not isinstance(event.get(key), SCALAR):
            raise ValueError(f"its {key} is not a string or a number")
    return event


def events(path: pathlib.Path) -> Iterator[dict]:
    """The trace's events in the file's order; Error (bad input) naming the
    line where the file is not a trace."""
    try:
        with inputs.open_file(path) as f:  # read a line at a time: it may be of any size
            for number, line in enumerate(f, 1):
                try:
                    try:
                        text = line.decode("utf-8").strip().rstrip(",")
                    except UnicodeDecodeError as err:
                        raise ValueError(f"not UTF-8 text (byte 0x{line[err.start]:02x})") from None
                    if number == 1 and text.endswith("}"):  # a whole document on one line
                        document = json.loads(text)
                        if not isinstance(document, dict) or not isinstance(document.get("traceEvents"), list):
                            raise ValueError("no traceEvents")
                        yield from map(_checked, document["traceEvents"])
                    elif number == 1:  # the document's head, up to its traceEvents
                        if not text.startswith("{"):
                            raise ValueError("not a JSON trace")
                    elif text not in ("", "]", "]}"):  # anything but its end: an event
                        yield _checked(json.loads(text))
                except ValueError as err:  # json.JSONDecodeError and UnicodeDecodeError too
                    raise Error(f"{path}:{number}: not a trace event: {err}", bad_input=True) from None
    except inputs.NotAFile:
        raise Error(f"{path}: not a file, so not a trace", bad_input=True) from None
    except OSError as err:
        raise Error(f"cannot read {path}: {err}", bad_input=True) from None


def over_bound(path: pathlib.Path, pad_us: float) -> list[tuple[float, float]]:
    """The windows (us from the run's start) of the chain instances the
    monitor marked over their bounds, each widened by PAD_US on both sides,
    overlapping ones merged. (Its other marks, each overrun of a declared
    time, can fill a run on a noisy machine.)"""
    opened, spans = {}, []
    for e in events(path):
        if e.get("cat") != "monitor" or not str(e.get("name", "")).startswith("over its bound"):
            continue
        if e["ph"] == "b":
            opened[e["id"]] = e["ts"]
        elif e["ph"] == "e" and e["id"] in opened:
            spans.append((opened.pop(e["id"]) - pad_us, e["ts"] + pad_us))
    merged: list[tuple[float, float]] = []
    for begin, end in sorted(spans):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((begin, end))
    return merged


def cut(source: Iterable[dict], windows: list[tuple[float, float]]) -> Iterator[dict]:
    """The events of SOURCE in the windows (us, sorted, disjoint): every
    metadata event; a slice that overlaps one; an async slice whose begin
    and end do; a flow whose every step lies in one (a flow cut in two
    would point at slices left out); a counter sample in one, and each
    counter's last sample before the first window, so that it starts at
    its value."""
    start = windows[0][0] if windows else 0.0
    ends = [end for _, end in windows]

    def within(begin: float, end: float) -> bool:
        """Whether [begin, end] overlaps a window: the first that ends at or
        after BEGIN starts at or before END."""
        i = bisect.bisect_left(ends, begin)
        return i < len(windows) and windows[i][0] <= end

    before: dict[tuple, dict] = {}           # counter -> its last sample before the windows
    waiting: dict[tuple, dict] = {}          # an async slice's begin, until its end
    flows: dict[tuple, list[dict]] = {}      # a flow's steps, until its last
    for e in source:
        ph = e.get("ph")
        ts = e.get("ts", 0.0)
        if ph == "M":
            yield e
        elif ph == "X":
            if within(ts, ts + e.get("dur", 0.0)):
                yield e
        elif ph == "C":
            if within(ts, ts):
                yield e
            elif ts < start:
                before[(e.get("pid"), e.get("name"))] = e
        elif ph == "b":
            waiting[(e.get("cat"), e.get("id"), e.get("pid"))] = e
        elif ph == "e":
            begun = waiting.pop((e.get("cat"), e.get("id"), e.get("pid")), None)
            if begun is not None and within(begun.get("ts", 0.0), ts):
                yield begun
                yield e
        elif ph in FLOW:
            key = (e.get("cat"), e.get("id"))
            steps = flows.setdefault(key, [])
            steps.append(e)
            if ph == "f":
                del flows[key]
                if all(within(s.get("ts", 0.0), s.get("ts", 0.0)) for s in steps):
                    yield from steps
        elif within(ts, ts):
            yield e
    yield from before.values()


def write(path: pathlib.Path, chosen: Iterable[dict]) -> int:
    """Writes CHOSEN as a trace, an event a line; returns how many. Error
    where PATH cannot be written; a part not written whole is removed."""
    count = 0
    try:
        with open(path, "w", encoding="utf-8") as out:
            try:
                out.write('{"displayTimeUnit": "ms", "traceEvents": [')
                for e in chosen:
                    out.write(("\n" if count == 0 else ",\n") + json.dumps(e, separators=(",", ":")))
                    count += 1
                out.write("\n]}\n")
            except BaseException:  # a bad event, a full disk, Ctrl-C
                path.unlink(missing_ok=True)
                raise
    except OSError as err:
        path.unlink(missing_ok=True)
        raise Error(f"cannot write {path}: {err.strerror or err}", bad_input=True) from None
    return count
