#!/usr/bin/env python3
"""The tables of docs/*.md, made from the result files under docs/results/.

A table in a page stands between two markers,

    <!-- table: NAME -->
    | ... the table, made from docs/results/NAME.json ... |
    <!-- end table -->

and its figures are in docs/results/NAME.json:

    {"format": "rtaccel-table 1",
     "date": "2026-11-24", "machine": "vm-2core", "command": "rtaccel bench ...",
     "columns": [{"name": "size"}, {"name": "p50 us", "align": "right", "format": "{:.1f}"}],
     "rows": [["64 KiB", 99.1], ...]}

A cell is a number (written with its column's `format`), a string (written
as it is: a range, a pair of runs, an emphasis) or null (empty). `date`,
`machine` (vm-2core: the 2-core development VM; h100, h200: a GPU machine)
and `command` say where the figures come from; the page says it in words.

    tools/docs/tables.py            # rewrite every page's tables from the data
    tools/docs/tables.py --check    # exit 1 where a page's table is not its data's

A figure is changed in its result file and the page made again; a table
edited by hand in the page fails the check (tests/python/test_docs.py).
"""

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FORMAT = "rtaccel-table 1"
BEGIN = re.compile(r"^<!-- table: ([a-z0-9][a-z0-9-]*) -->$")
END = "<!-- end table -->"
RULE = {None: "---", "left": "---", "right": "---:", "center": ":---:"}


def load(name):
    """The table NAME's data, checked."""
    path = RESULTS / f"{name}.json"
    data = json.loads(path.read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{path.relative_to(ROOT)}: format is not {FORMAT!r}")
    width = len(data["columns"])
    for n, row in enumerate(data["rows"]):
        if len(row) != width:
            raise ValueError(f"{path.relative_to(ROOT)}: row {n} has {len(row)} cells, not {width}")
    return data


def cell(value, column):
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return column.get("format", "{}").format(value)


def render(data):
    """The table's Markdown lines."""
    columns = data["columns"]
    lines = ["| " + " | ".join(c["name"] for c in columns) + " |",
             "|" + "|".join(RULE[c.get("align")] for c in columns) + "|"]
    for row in data["rows"]:
        lines.append("| " + " | ".join(cell(v, c) for v, c in zip(row, columns)) + " |")
    return lines


def rebuild(text, where):
    """TEXT with every marked table made from its data, and the names used."""
    out, names, lines = [], [], text.splitlines()
    i = 0
    while i < len(lines):
        m = BEGIN.match(lines[i].strip())
        out.append(lines[i])
        i += 1
        if not m:
            continue
        end = next((j for j in range(i, len(lines)) if lines[j].strip() == END), None)
        if end is None:
            raise ValueError(f"{where}:{i}: table {m.group(1)} has no '{END}'")
        names.append(m.group(1))
        out += render(load(m.group(1)))
        out.append(lines[end])
        i = end + 1
    return "\n".join(out) + ("\n" if text.endswith("\n") else ""), names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 where a table differs from its data")
    args = parser.parse_args(argv)
    wrong, used = [], set()
    for page in PAGES:
        where = page.relative_to(ROOT)
        text = page.read_text()
        try:
            made, names = rebuild(text, where)
        except (ValueError, OSError, KeyError) as e:
            wrong.append(f"{where}: {e}")
            continue
        used |= set(names)
        if made == text:
            continue
        if args.check:
            old, new = text.splitlines(), made.splitlines()
            n = next((k for k, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
            wrong.append(f"{where}:{n + 1}: a table is not what its data makes "
                         f"(run tools/docs/tables.py): {old[n] if n < len(old) else ''!r}")
        else:
            page.write_text(made)
            print(f"{where}: tables made again", file=sys.stderr)
    for path in sorted(RESULTS.glob("*.json")):
        if path.stem not in used and json.loads(path.read_text()).get("format") == FORMAT:
            wrong.append(f"{path.relative_to(ROOT)}: in no page")
    for line in wrong:
        print(line, file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
