"""The commands that README.md and docs/ show work as shown.

- Every `rtaccel` command in a fenced block is parsed by the command's own
  parser: a subcommand or option that does not exist, or a bad value, fails.
- Every `rtaccel ...` in inline code names a subcommand that exists and
  options it has (inline code is a synopsis: `rtaccel lockstat RUN|FILE...`).
- Blocks fenced as ```sh runnable are run, from a folder where examples/ is
  the checkout's, with durations cut to a second: each command must exit 0.
  A block fenced as ```yaml file=NAME is written there as NAME first, for
  the runnable blocks of its page (a workload a tutorial writes); one
  fenced as ```sh runnable continues runs after the page's block before it,
  in its folder (a comparison with an earlier run).
- The README's sample output of `rtaccel analyze examples/quickstart.yaml` is
  what the command prints.
"""

import argparse
import contextlib
import functools
import io
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

import needs
from conftest import ROOT
from rtaccel import cli

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(.*)$")
COMMAND = re.compile(r"^(?:sudo\s+)?(?:\S*/)?rtaccel\s+(.*)$")
INLINE = re.compile(r"`(?:sudo\s+)?(?:\.venv/bin/)?rtaccel\s+([^`]+)`")


def blocks():
    """(file, line, info, lines) of every fenced block of the docs."""
    for path in DOCS:
        info, start, body = None, 0, []
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = FENCE.match(line.strip())
            if m and info is None:
                info, start, body = m.group(1).strip(), n, []
            elif m:
                yield path, start, info, body
                info = None
            elif info is not None:
                body.append((n, line))


def commands(lines):
    """(line, argv) of each rtaccel command in LINES: comments, a trailing
    '&' and sudo dropped, continuation lines joined."""
    joined, first = "", None
    for n, line in lines:
        first = first or n
        if line.rstrip().endswith("\\"):
            joined += line.rstrip()[:-1] + " "
            continue
        text, joined = (joined + line).strip(), ""
        at, first = first, None
        m = COMMAND.match(text)
        if not m:
            continue
        words = shlex.split(m.group(1), comments=True)
        if words and words[-1] == "&":
            words.pop()
        yield at, words


FENCED = [(f"{p.relative_to(ROOT)}:{n}", info, argv) for p, _, info, body in blocks()
          for n, argv in commands(body) if not info or info.split()[0] in ("sh", "console")]


LIB = ROOT / "python" / "rtaccel" / "lib"
# Commands whose options are a program's own (rtaccel passes them on).
PASSED_ON = {"server": ["rtaccel-server", "--help"], "isolate": ["rtaccel-isolate", "--help"]}


@functools.cache
def program_options(command):
    """The options the program behind COMMAND lists in its usage."""
    program, *args = PASSED_ON[command]
    r = subprocess.run([str(LIB / program), *args], capture_output=True, text=True, timeout=30)
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", r.stdout + r.stderr))


def parse(argv):
    """The parser's answer to ARGV: None, or its error message."""
    if argv and argv[0] in PASSED_ON:
        unknown = {w.split("=")[0] for w in argv if w.startswith("--") and w != "--"} - \
            program_options(argv[0])
        return f"{PASSED_ON[argv[0]][0]} has no {sorted(unknown)}" if unknown else None
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            cli.build_parser().parse_args(argv)
        except SystemExit as e:
            return None if e.code == 0 else err.getvalue().strip() or f"exit {e.code}"
    return None


def test_the_docs_show_commands():
    assert len(FENCED) >= 40, FENCED


@pytest.mark.parametrize("where, info, argv", FENCED, ids=[w for w, _, _ in FENCED])
def test_every_fenced_command_parses(where, info, argv):
    assert parse(argv) is None, f"{where}: rtaccel {shlex.join(argv)}: {parse(argv)}"


def subparsers(parser):
    return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def test_every_inline_command_names_what_exists():
    wrong = []
    for path in DOCS:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in INLINE.finditer(line):
                parser, words = cli.build_parser(), m.group(1).split()
                while words and words[0] in subparsers(parser):
                    parser = subparsers(parser)[words.pop(0)]
                if words and re.fullmatch(r"[a-z][a-z-]+", words[0]) and subparsers(parser):
                    wrong.append(f"{path.name}:{n}: `rtaccel {m.group(1)}`: no command {words[0]!r}")
                have = {s for a in parser._actions for s in a.option_strings}
                if parser.prog.split()[-1] in PASSED_ON:
                    have |= program_options(parser.prog.split()[-1])
                for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", m.group(1)):
                    if option not in have:
                        wrong.append(f"{path.name}:{n}: `rtaccel {m.group(1)}`: no option {option}")
    assert not wrong, "\n".join(wrong)


def files():
    """Per page: {NAME: text} of its blocks fenced as ```yaml file=NAME."""
    out: dict = {}
    for path, _, info, body in blocks():
        words = info.split()
        for word in words[1:] if words[:1] == ["yaml"] else []:
            if word.startswith("file="):
                out.setdefault(path, {})[word[len("file="):]] = "".join(line + "\n" for _, line in body)
    return out


def runnable():
    """(where, commands, files) of each runnable block: a block that
    continues has the commands of the one before it first."""
    out, before = [], {}
    for path, n, info, body in blocks():
        words = info.split()
        if words[:2] != ["sh", "runnable"]:
            continue
        block = [argv for _, argv in commands(body)]
        if "continues" in words[2:]:
            block = before.get(path, []) + block
        before[path] = block
        out.append((f"{path.relative_to(ROOT)}:{n}", block, FILES.get(path, {})))
    return out


FILES = files()
RUNNABLE = runnable()
# Exit 1 of these says the checked property did not hold (a chain over its
# bound), which a one-second run on a loaded machine may show; 2 would be a
# command the docs got wrong.
PROPERTY_CHECKS = {"analyze", "run", "compare", "report", "demo"}


# What cuts a command's work where the docs give it no --duration: the
# benchmarks' sample counts. A test's time must not follow the host's speed
# (at a third of it the whole of net-priority --dds takes eight minutes).
SHORTER = {
    ("experiment", "schedulability"): ["--sets", "20"],
    ("demo",): ["--duration", "1"],
    ("bench", "gang-synthetic"): ["--duration", "1"],
    ("bench", "net-priority"): ["--sizes", "1M"],
    ("bench", "corunners"): ["--rounds", "1", "--iterations", "50"],
    ("bench", "registrations"): ["--callbacks", "8,80"],
}


def shortened(argv):
    """ARGV with its durations and sample counts cut, for a test."""
    out, it = [], iter(argv)
    for word in it:
        out.append(word)
        if word == "--duration":
            out.append("1")
            next(it, None)
    for command, cut in SHORTER.items():
        if tuple(argv[:len(command)]) == command and cut[0] not in argv:
            out += cut
    return out


@pytest.mark.slow
@needs.mark("root", os.geteuid() != 0, "the blocks run as root (sudo: namespaces, SCHED_FIFO)")
@pytest.mark.parametrize("where, block, written", RUNNABLE, ids=[w for w, _, _ in RUNNABLE])
def test_runnable_blocks_run(tmp_path, where, block, written):
    """Each block in one folder, in order, as a user would type it, with the
    files its page writes."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for name, text in written.items():
        (tmp_path / name).write_text(text)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"),
               RTACCEL_CALIBRATION=str(tmp_path / "calibration.json"))
    for argv in block:
        r = subprocess.run([sys.executable, "-m", "rtaccel.cli", *shortened(argv)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=240, env=env)
        allowed = (0, 1) if argv[0] in PROPERTY_CHECKS else (0,)
        assert r.returncode in allowed, \
            f"{where}: rtaccel {shlex.join(argv)}: exit {r.returncode}\n{r.stderr[-2000:]}"


def test_some_commands_are_run():
    assert sum(len(block) for _, block, _ in RUNNABLE) >= 15, RUNNABLE


def test_the_readmes_sample_analysis_is_what_analyze_prints():
    sample = next(body for p, _, info, body in blocks() if p.name == "README.md" and body
                  and body[0][1].startswith("# rtaccel analyze examples/quickstart.yaml"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cwd = os.getcwd()
        os.chdir(ROOT)
        try:
            assert cli.main(["analyze", "examples/quickstart.yaml", "--no-calibration"]) == 0
        finally:
            os.chdir(cwd)
    assert [line.split() for _, line in sample] == [line.split() for line in out.getvalue().splitlines()]


def test_the_tables_are_their_result_files():
    """Each table between `<!-- table: NAME -->` markers is what
    tools/docs/tables.py makes of docs/results/NAME.json."""
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "docs" / "tables.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
