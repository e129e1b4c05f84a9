#!/usr/bin/env python3
"""rtaccel's layering, checked against src/LAYERS, the one list of which layer may use which.

usage: layers.py check SOURCE_DIR [BUILD_DIR]
           Every #include of a layer's header (src/LAYER/*.h, private, or
           include/rtaccel/*, public) is an edge the list allows, every edge
           the list allows is used, docs/architecture.md's layer section is
           the one the list gives and, with BUILD_DIR (its
           compile_commands.json), no source is compiled twice.
       layers.py selftest SOURCE_DIR
           check passes on the tree and fails, naming the edge, on each
           forbidden edge added on purpose, a source compiled twice and a
           stale layer section.
       layers.py docs SOURCE_DIR
           Writes docs/architecture.md's layer section from the list.

Exit 0: as the list says; 1: not; 2: the list or the arguments are wrong.
"""

import json
import pathlib
import re
import sys

LIST = "src/LAYERS"
DOC = "docs/architecture.md"
DOC_BEGIN = "<!-- layers: written by tests/build/layers.py docs from src/LAYERS; edit the list, not this -->"
DOC_END = "<!-- /layers -->"
SCANNED = ("src", "include/rtaccel", "tools", "python/bindings", "bench", "fuzz", "tests", "examples")
SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".h", ".hpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


class ListError(Exception):
    """src/LAYERS itself is wrong: exit 2, not a finding about the code."""


class Layers:
    """src/LAYERS read: each layer's uses, each public header's layer, each consumer's uses."""

    def __init__(self, root, text):
        self.root = root
        self.uses = {}        # layer -> the layers it may use, in the list's order
        self.headers = {}     # "rtaccel/x.h" -> layer
        self.consumers = {}   # folder -> the layers it may use
        self.line_of = {}     # unit -> its line in src/LAYERS, for messages
        section = None
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
                if section not in ("layers", "headers", "consumers"):
                    raise ListError(f"{LIST}:{number}: no section [{section}]")
                continue
            name, colon, rest = line.partition(":")
            name, names = name.strip(), rest.split()
            if not colon or not name or section is None:
                raise ListError(f"{LIST}:{number}: not 'NAME: LAYER...' in a section: {raw}")
            self.line_of[name] = number
            if section == "layers":
                self.uses[name] = names
            elif section == "headers":
                if len(names) != 1:
                    raise ListError(f"{LIST}:{number}: a header belongs to one layer: {raw}")
                self.headers[name.removeprefix("include/")] = names[0]
            else:
                self.consumers[name.rstrip("/")] = names
        self._check()

    def _check(self):
        on_disk = {p.name for p in (self.root / "src").iterdir() if p.is_dir()}
        for layer in sorted(on_disk - self.uses.keys()):
            raise ListError(f"{LIST}: src/{layer}/ is no layer of [layers]")
        for layer in sorted(self.uses.keys() - on_disk):
            raise ListError(f"{LIST}:{self.line_of[layer]}: layer {layer} has no folder src/{layer}/")
        named = [(u, n) for u, ns in list(self.uses.items()) + list(self.consumers.items()) for n in ns]
        named += [(h, n) for h, n in self.headers.items()]
        for unit, layer in named:
            if layer not in self.uses:
                raise ListError(f"{LIST}:{self.line_of.get(unit, self.line_of.get('include/' + unit))}: "
                                f"{unit} names {layer}, which is no layer")
        for header in sorted(p.name for p in (self.root / "include/rtaccel").iterdir()):
            if "rtaccel/" + header not in self.headers:
                raise ListError(f"{LIST}: include/rtaccel/{header} belongs to no layer of [headers]")
        for header in self.headers:
            if not (self.root / "include" / header).is_file():
                raise ListError(f"{LIST}: [headers] names include/{header}, which is not there")
        self.rank()  # a cycle is an error of the list

    def rank(self):
        """Each layer's height: 0 for one that uses none, else one above the highest it uses."""
        ranks, visiting = {}, set()

        def height(layer):
            if layer in ranks:
                return ranks[layer]
            if layer in visiting:
                raise ListError(f"{LIST}: the layers use each other in a cycle through {layer}")
            visiting.add(layer)
            ranks[layer] = 1 + max((height(u) for u in self.uses[layer] if u != layer), default=-1)
            return ranks[layer]

        for layer in self.uses:
            height(layer)
        return ranks

    def unit_of(self, rel):
        """The layer or consumer folder a file belongs to, or None."""
        parts = rel.split("/")
        if parts[0] == "src" and len(parts) > 2:
            return parts[1]
        if rel.startswith("include/rtaccel/"):
            return self.headers.get(rel.removeprefix("include/"))
        best = None
        for folder in self.consumers:
            if (rel == folder or rel.startswith(folder + "/")) and (best is None or len(folder) > len(best)):
                best = folder
        return best

    def allowed(self, unit):
        return self.uses.get(unit, self.consumers.get(unit, []))


def source_files(root, overlay):
    files = set(overlay)
    for top in SCANNED:
        for path in (root / top).rglob("*"):
            if path.suffix in SOURCE_SUFFIXES and path.is_file():
                files.add(path.relative_to(root).as_posix())
    return sorted(files)


def read_lines(root, rel, overlay):
    path = root / rel
    lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
    return lines + overlay.get(rel, [])


def edges(root, layers, overlay):
    """Every include of a layer's header: (file, line, from, to, "public"|"private", header)."""
    found, unplaced = [], []
    for rel in source_files(root, overlay):
        unit = layers.unit_of(rel)
        for number, text in enumerate(read_lines(root, rel, overlay), 1):
            match = INCLUDE.match(text)
            if not match:
                continue
            quote, name = match.groups()
            first = name.split("/", 1)[0]
            target = None
            if first == "rtaccel":
                if name not in layers.headers:
                    unplaced.append(f"{rel}:{number}: includes {name}, a public header of no layer of {LIST}")
                    continue
                target = (layers.headers[name], "public")
            elif first in layers.uses and (root / "src" / name).is_file():
                # Only a header that is there: <net/if.h> is the system's, not the net layer's.
                target = (first, "private")
            elif quote == '"':
                # A relative include ("../core/x.h") is the header it resolves to.
                resolved = (root / rel).parent.joinpath(name).resolve()
                if not resolved.is_file():
                    continue
                try:
                    inner = resolved.relative_to(root.resolve()).as_posix()
                except ValueError:
                    continue
                if inner.startswith("include/rtaccel/"):
                    target = (layers.headers.get(inner.removeprefix("include/")), "public")
                elif inner.startswith("src/") and inner.count("/") >= 2:
                    target = (inner.split("/")[1], "private")
            if target is None:
                continue
            if unit is None:
                unplaced.append(f"{rel}:{number}: includes {name}, but {rel} belongs to no unit of {LIST}")
                continue
            found.append((rel, number, unit, target[0], target[1], name))
    return found, unplaced


def forbidden(layers, found):
    """The edges the list does not allow. A layer's private headers are its own (and core's
    every layer's that uses core); a consumer may use the private headers of the layers it uses."""
    bad = []
    for rel, number, unit, to, kind, name in found:
        if to == unit:
            continue
        uses = f"({unit}: {' '.join(layers.allowed(unit)) or 'nothing'})"
        if to not in layers.allowed(unit):
            what = "a private header" if kind == "private" else "the public header"
            bad.append(f"{rel}:{number}: {unit} -> {to}: #include {name}, {what} of {to}, "
                       f"an edge {LIST} does not allow {uses}")
        elif kind == "private" and unit in layers.uses and to != "core":
            bad.append(f"{rel}:{number}: {unit} -> {to}: #include {name}, a private header of {to}: "
                       f"a layer uses another through its public headers (include/rtaccel/) only {uses}")
    return bad


def unused(layers, found):
    """The edges the list allows that no include makes: the list says more than the code does."""
    used = {(unit, to) for _, _, unit, to, _, _ in found}
    stale = []
    for unit in list(layers.uses) + list(layers.consumers):
        for to in layers.allowed(unit):
            if (unit, to) not in used:
                stale.append(f"{LIST}:{layers.line_of[unit]}: {unit} -> {to} is allowed, but nothing in "
                             f"{unit} includes a header of {to}: remove it from the list")
    return stale


def compiled_twice(root, commands):
    """Sources of the checkout compiled by more than one compile command, with their targets."""
    targets = {}
    for entry in commands:
        source = pathlib.Path(entry["directory"], entry["file"]).resolve()
        try:
            rel = source.relative_to(root.resolve()).as_posix()
        except ValueError:
            continue
        output = re.search(r"-o\s+(\S+)", entry.get("command", "")) or None
        target = re.search(r"CMakeFiles/([^/]+)\.dir/", output.group(1)) if output else None
        targets.setdefault(rel, []).append(target.group(1) if target else entry.get("output", "?"))
    return [f"{rel}: compiled {len(ts)} times ({', '.join(ts)}): link the target that compiles it instead"
            for rel, ts in sorted(targets.items()) if len(ts) > 1]


def doc_section(layers):
    """docs/architecture.md's layer section: each layer with its public headers, what it uses
    and what uses it, highest first; then the programs, bindings and tests above the layers."""
    ranks = layers.rank()
    order = sorted(layers.uses, key=lambda layer: (-ranks[layer], list(layers.uses).index(layer)))
    users = {layer: [u for u in order if layer in layers.uses[u]] for layer in order}
    headers = {layer: [h.removeprefix("rtaccel/") for h, owner in layers.headers.items() if owner == layer]
               for layer in order}
    rows = []
    rows += ["| layer | its public headers (`include/rtaccel/`) | uses | used by |", "|---|---|---|---|"]
    for layer in order:
        rows.append(f"| `{layer}` | {', '.join(f'`{h}`' for h in headers[layer]) or '(none)'} | "
                    f"{', '.join(layers.uses[layer]) or '(nothing)'} | {', '.join(users[layer]) or '(nothing)'} |")
    rows += ["", "| programs, bindings and tests | use |", "|---|---|"]
    for folder, uses in layers.consumers.items():
        rows.append(f"| `{folder}/` | {', '.join(uses)} |")
    return "\n".join([DOC_BEGIN, "", *rows, "", DOC_END])


def doc_differs(root, layers, doc_text=None):
    text = doc_text if doc_text is not None else (root / DOC).read_text()
    begin, end = text.find(DOC_BEGIN), text.find(DOC_END)
    if begin < 0 or end < begin:
        return [f"{DOC}: no layer section between '{DOC_BEGIN}' and '{DOC_END}'"]
    if text[begin:end + len(DOC_END)] != doc_section(layers):
        return [f"{DOC}: the layer section is not the one {LIST} gives: run "
                f"tests/build/layers.py docs {root}"]
    return []


def findings(root, overlay=None, commands=None, doc_text=None):
    layers = Layers(root, (root / LIST).read_text())
    found, unplaced = edges(root, layers, overlay or {})
    result = unplaced + forbidden(layers, found)
    if not overlay:
        # With lines added on purpose an edge may become used; only the tree as it is says
        # which allowed edges are stale.
        result += unused(layers, found)
    if commands is not None:
        result += compiled_twice(root, commands)
    return result + doc_differs(root, layers, doc_text), found


def check(root, build):
    commands = None
    if build is not None:
        path = build / "compile_commands.json"
        if not path.is_file():
            raise ListError(f"{path}: not there (configure with CMAKE_EXPORT_COMPILE_COMMANDS=ON)")
        commands = json.loads(path.read_text())
    result, found = findings(root, commands=commands)
    for line in result:
        print(f"FAIL: {line}")
    if result:
        print(f"the layers are declared in {root / LIST}")
        return 1
    pairs = {(unit, to) for _, _, unit, to, _, _ in found if unit != to}
    print(f"{len(found)} includes of a layer's header, {len(pairs)} edges between units, each allowed by {LIST}"
          + (f"; {len(commands)} compile commands, no source twice" if commands is not None else ""))
    return 0


def selftest(root):
    """check must fail on each of these, naming what was added, and pass without them."""
    baseline, _ = findings(root)
    if baseline:
        print("FAIL: check fails on the tree itself:\n  " + "\n  ".join(baseline))
        return 1
    cases = [
        ("core uses no layer's public header", {"src/core/clock.h": ['#include "rtaccel/exec.hpp"']},
         "src/core/clock.h:", "core -> exec"),
        ("a layer reaches into another's private header", {"src/exec/plan.cc": ['#include "net/transport.h"']},
         "src/exec/plan.cc:", "exec -> net"),
        ("a relative include is the header it names", {"src/lock/mutex.c": ['#include "../accel/protocol.h"']},
         "src/lock/mutex.c:", "lock -> accel"),
        ("a public header is its layer's", {"include/rtaccel/lock.h": ["#include <rtaccel/workload.hpp>"]},
         "include/rtaccel/lock.h:", "lock -> workload"),
        ("a program uses only its layers", {"tools/server/main.cc": ['#include "rtaccel/exec.hpp"']},
         "tools/server/main.cc:", "tools/server -> exec"),
        ("a new file belongs to a unit", {"examples/new/new.c": ['#include "rtaccel/accel.h"']},
         "examples/new/new.c:", "belongs to no unit"),
    ]
    failed = 0
    for what, overlay, where, edge in cases:
        result, _ = findings(root, overlay=overlay)
        if not any(where in line and edge in line for line in result):
            print(f"FAIL: {what}: check did not name {edge} at {where}: {result}")
            failed += 1
        else:
            print(f"ok: {what}: {next(line for line in result if edge in line)}")
    twice = [{"directory": str(root), "file": "src/core/cgroup.c", "command": f"cc -o CMakeFiles/{t}.dir/x.o"}
             for t in ("rtaccel_core_objs", "rtaccel-membench")]
    result, _ = findings(root, commands=twice)
    if not any("src/core/cgroup.c: compiled 2 times (rtaccel_core_objs, rtaccel-membench)" in r for r in result):
        print(f"FAIL: a source compiled twice was not named: {result}")
        failed += 1
    else:
        print("ok: a source compiled by two targets is named with them")
    doc = (root / DOC).read_text()
    result, _ = findings(root, doc_text=doc.replace("| `exec` |", "| `exec ` |", 1))
    if not any("layer section is not the one" in r for r in result):
        print(f"FAIL: a layer section that differs from the list was not found: {result}")
        failed += 1
    else:
        print("ok: a layer section that differs from the list is found")
    return 1 if failed else 0


def write_doc(root):
    layers = Layers(root, (root / LIST).read_text())
    path = root / DOC
    text = path.read_text()
    begin, end = text.find(DOC_BEGIN), text.find(DOC_END)
    if begin < 0 or end < begin:
        raise ListError(f"{DOC}: no layer section between '{DOC_BEGIN}' and '{DOC_END}' to write")
    path.write_text(text[:begin] + doc_section(layers) + text[end + len(DOC_END):])
    return 0


def main(argv):
    if len(argv) < 3 or argv[1] not in ("check", "selftest", "docs") or len(argv) > 4:
        print(__doc__, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[2])
    try:
        if argv[1] == "check":
            return check(root, pathlib.Path(argv[3]) if len(argv) == 4 else None)
        if argv[1] == "selftest":
            return selftest(root)
        return write_doc(root)
    except ListError as error:
        print(f"FAIL: {error}")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
