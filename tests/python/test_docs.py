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
- docs/reference/ has one page per public header of include/rtaccel/ and
  nothing else, each listed in its README.md. Every function a C header
  declares is a heading of its header's page, whose section holds the
  declaration in a ```c block and every errno name the header's comment on
  it mentions; every symbol of a version script (src/*/exports.map) is a
  heading of the page of the header that declares it, or, for the functions
  the interposer replaces, named on shim.h's page; a heading names no
  function, type or constant its header does not have.
"""

import argparse
import contextlib
import errno
import fnmatch
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

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "docs" / "reference").glob("*.md"))]
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


# ---- the API reference: docs/reference/, a page per public header ----------

INCLUDE = ROOT / "include" / "rtaccel"
REFERENCE = ROOT / "docs" / "reference"
HEADERS = sorted(p for p in INCLUDE.iterdir() if p.suffix in (".h", ".hpp"))
C_HEADERS = [h for h in HEADERS if h.suffix == ".h"]
ERRNO_NAMES = {name for name in dir(errno) if re.fullmatch(r"E[A-Z0-9]+", name)}


def c_file_scope(text):
    """A C header's file scope in order: ("comment", text), ("blank",),
    ("pp",) and ("stmt", text, declaration), where a statement's
    declaration is its text outside braces (a function's body, a struct's
    fields) and comments."""
    text = re.sub(r"#ifdef __cplusplus\n.*?#endif\n", "\n", text, flags=re.S)
    out, i, depth, stmt, top, body = [], 0, 0, "", "", False
    while i < len(text):
        c = text[i]
        if text.startswith("/*", i) or text.startswith("//", i):
            end = text.index("*/", i) + 2 if text[i + 1] == "*" else text.find("\n", i)
            if depth == 0 and not stmt.strip():
                out.append(("comment", text[i:end]))
                stmt = ""
            i = end
            continue
        if depth == 0 and not stmt.strip():
            if c == "#":  # a preprocessor line, continuations included
                end = i
                while (end := text.find("\n", end)) > 0 and text[end - 1] == "\\":
                    end += 1
                out.append(("pp",))
                i, stmt = (end if end > 0 else len(text)), ""
                continue
            if c == "\n" and "\n" in stmt:
                out.append(("blank",))
                i, stmt = i + 1, ""
                continue
        if c == "{":
            body = body or (depth == 0 and stmt.rstrip().endswith(")"))
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and body:  # the end of a function's definition
                out.append(("stmt", stmt, top))
                i, stmt, top, body = i + 1, "", "", False
                continue
        elif depth == 0 and c == ";":
            out.append(("stmt", stmt + ";", top + ";"))
            i, stmt, top = i + 1, "", ""
            continue
        stmt += c
        top += c if depth == 0 and c != "{" and c != "}" else ""
        i += 1
    return out


@functools.cache
def c_functions(header):
    """{name: (declaration, comment)} of the functions HEADER declares or
    defines. A comment covers the declarations after it up to a blank line
    or the next comment."""
    found, comment = {}, ""
    for item in c_file_scope(header.read_text()):
        if item[0] == "comment":
            comment = item[1]
        elif item[0] == "blank":
            comment = ""
        elif item[0] == "stmt":
            m = re.match(r"[^()]*?\b(rtaccel_\w+)\s*\(", item[2].strip())
            if m:
                found[m.group(1)] = (" ".join(item[2].replace("RTACCEL_API", "").split()), comment)
    return found


def normalised(c):
    """C text with its layout gone: one space between words, none beside punctuation."""
    c = " ".join(c.replace("RTACCEL_API", "").split())
    return re.sub(r"\s*([()*,;\[\]{}])\s*", r"\1", c).rstrip(";")


def returns_void(declaration):
    before = declaration.split("(")[0].rsplit(None, 1)[0]
    return before.replace("static", "").replace("inline", "").split() == ["void"]


def page_of(header):
    return REFERENCE / f"{header.name}.md"


@functools.cache
def sections(page):
    """(heading, text) of each heading of PAGE: its text runs to the next
    heading of its level or above. Fenced blocks hold no headings."""
    heads, fenced, lines = [], False, page.read_text().splitlines()
    for n, line in enumerate(lines):
        fenced ^= line.startswith("```")
        m = None if fenced else re.match(r"(#+)\s+(.*)", line)
        if m:
            heads.append((n, len(m.group(1)), m.group(2)))
    out = []
    for k, (n, level, heading) in enumerate(heads):
        end = next((m for m, lv, _ in heads[k + 1:] if lv <= level), len(lines))
        out.append((heading, "\n".join(lines[n + 1:end])))
    return out


def named_functions(heading):
    return re.findall(r"(\w+)\(\)", heading)


def c_blocks(text):
    return "\n".join(re.findall(r"^```c\n(.*?)^```", text, flags=re.S | re.M))


def section_of(page, function):
    return next((text for heading, text in sections(page) if function in named_functions(heading)), None)


def test_the_reference_has_a_page_per_public_header_and_lists_them():
    pages = {p.name for p in REFERENCE.glob("*.md")} - {"README.md"}
    assert pages == {page_of(h).name for h in HEADERS}, \
        f"pages without a header: {sorted(pages - {page_of(h).name for h in HEADERS})}; " \
        f"headers without a page: {sorted({page_of(h).name for h in HEADERS} - pages)}"
    index = (REFERENCE / "README.md").read_text()
    assert not [p for p in sorted(pages) if f"({p})" not in index], "pages the index does not link"


def test_the_reference_parser_finds_the_c_api():
    found = {h.name: len(c_functions(h)) for h in C_HEADERS}
    assert found["lock.h"] >= 20 and found["net.h"] >= 20 and found["requests.h"] == 6, found
    assert "EDEADLK" in c_functions(INCLUDE / "lock.h")["rtaccel_mutex_lock"][1]


@pytest.mark.parametrize("header", C_HEADERS, ids=[h.name for h in C_HEADERS])
def test_the_reference_documents_every_c_function(header):
    """A section per function: its declaration in a ```c block, the errno
    names the header's comment on it gives (a void function returns none)."""
    wrong = []
    for name, (declaration, comment) in c_functions(header).items():
        text = section_of(page_of(header), name)
        if text is None:
            wrong.append(f"{name}: no heading names {name}()")
            continue
        if normalised(declaration) not in normalised(c_blocks(text)):
            wrong.append(f"{name}: no ```c block has its declaration: {declaration}")
        errs = set(re.findall(r"\bE[A-Z0-9]+\b", comment)) & ERRNO_NAMES
        for err in [] if returns_void(declaration) else sorted(errs):
            if not re.search(rf"\b{err}\b", text):
                wrong.append(f"{name}: the header gives {err}, its section does not")
    assert not wrong, f"{page_of(header).relative_to(ROOT)}:\n" + "\n".join(wrong)


@pytest.mark.parametrize("header", HEADERS, ids=[h.name for h in HEADERS])
def test_the_reference_documents_nothing_its_header_lacks(header):
    """Functions in headings are declared by the header; the names of
    types and constants in headings occur in it."""
    source = header.read_text()
    wrong = []
    for heading, _ in sections(page_of(header)):
        for name in named_functions(heading):
            declared = name in c_functions(header) if header.suffix == ".h" \
                else re.search(rf"\b{name}\s*\(", source)
            if not declared:
                wrong.append(f"{heading!r}: {header.name} declares no {name}()")
        for name in re.findall(r"\b(?:rtaccel|RTACCEL)_\w+", heading):
            if not re.search(rf"\b{name}\b", source):
                wrong.append(f"{heading!r}: {header.name} has no {name}")
    assert not wrong, "\n".join(wrong)


def exported(version_script):
    """The symbols and patterns of a version script's global: part."""
    text = re.sub(r"/\*.*?\*/", "", version_script.read_text(), flags=re.S)
    return re.split(r"[\s;]+", text.split("global:")[1].split("local:")[0].strip())


MAPS = sorted(ROOT.glob("src/*/exports.map"))


@pytest.mark.parametrize("version_script", MAPS, ids=[m.parent.name for m in MAPS])
def test_the_reference_documents_every_exported_symbol(version_script):
    """An rtaccel symbol (a pattern: the header functions it matches) is a
    heading of the page of the header that declares it, and every function
    of the layer's header is exported; the other symbols, the functions the
    interposer replaces, are named on the layer's header's page."""
    declared = {name: h for h in C_HEADERS for name in c_functions(h)}
    layer = INCLUDE / f"{version_script.parent.name}.h"
    assert layer.exists(), f"{version_script}: no header {layer.name} for its layer"
    wrong, matched = [], set()
    for symbol in exported(version_script):
        names = fnmatch.filter(declared, symbol)
        matched |= set(names)
        if not symbol.startswith("rtaccel_"):
            if f"`{symbol}`" not in page_of(layer).read_text():
                wrong.append(f"{symbol}: not named on {page_of(layer).name}")
        elif not names:
            wrong.append(f"{symbol}: exported, but no header declares it")
        for name in names:
            if section_of(page_of(declared[name]), name) is None:
                wrong.append(f"{name}: exported, but no heading of {page_of(declared[name]).name} names it")
    for name, (declaration, _) in c_functions(layer).items():
        if name not in matched and not declaration.startswith("static"):
            wrong.append(f"{name}: declared in {layer.name}, not exported")
    assert not wrong, f"{version_script.relative_to(ROOT)}:\n" + "\n".join(wrong)
