"""The rtaccel command of the example workloads this installation ships
(examples): what each is, and a copy of them to start one's own from."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from rtaccel.commands import common
from rtaccel.errors import EXIT_BAD_INPUT, EXIT_OK

# What a listing shows of a header's first sentence: with the name, about
# a line of a terminal.
SUMMARY_CHARS = 72


def shipped() -> list[Path]:
    """The example workloads, by name."""
    return sorted(common.EXAMPLES_DIR.glob("*.yaml"))


def summary(path: Path) -> str:
    """The first sentence of PATH's header comment, shortened to a line."""
    words: list[str] = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("#"):
            break
        text = line.lstrip("#").strip()
        if not text:
            if words:
                break
            continue
        words += text.split()
        if text.endswith((".", ":")):
            break
    sentence = " ".join(words)
    if len(sentence) <= SUMMARY_CHARS:
        return sentence
    return sentence[:SUMMARY_CHARS - 3].rsplit(" ", 1)[0] + "..."


def cmd_examples(args) -> int:
    examples = shipped()
    if args.copy is None:
        width = max(len(p.stem) for p in examples)
        print(f"# the example workloads in {common.EXAMPLES_DIR} (`rtaccel analyze NAME`, `rtaccel run NAME`; "
              "`rtaccel examples --copy DIR` to start your own from one)")
        for path in examples:
            print(f"{path.stem:<{width}}  {summary(path)}")
        return EXIT_OK
    folder = Path(args.copy)
    there = [folder / p.name for p in examples if (folder / p.name).exists()]
    if there:
        # A workload the user edited is theirs: none is overwritten.
        more = f" and {len(there) - 1} more" if len(there) > 1 else ""
        print(f"rtaccel examples: {there[0]}{more} already there: nothing copied (give another folder, "
              "or remove them)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not common.make_results_folder("rtaccel examples", str(folder)):
        return EXIT_BAD_INPUT
    for path in examples:
        shutil.copyfile(path, folder / path.name)
    first = folder / "quickstart.yaml"
    print(f"# {len(examples)} example workloads copied into {folder}; next: `rtaccel analyze {first}`, then "
          f"`rtaccel run {first}` (docs/tutorial.md writes one of your own)")
    return EXIT_OK


def register(sub) -> None:
    """Adds the family's commands to the parser's SUB."""
    p = sub.add_parser("examples", help="the example workloads this rtaccel ships, or a copy of them")
    p.add_argument("--copy", metavar="DIR", help="copy them into DIR (made if it is not there; a file "
                                                "already there is not overwritten)")
    p.set_defaults(func=cmd_examples)
