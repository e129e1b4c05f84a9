"""Functions a reader can hold: none in the sources of the library, the
tools, the bindings or the Python package is longer than LONGEST lines, as
lizard measures a function (from its signature to its closing brace or its
last statement). The tests, benches and fuzzers are left out: a test reads
as a list of steps, however long."""

import pathlib

import lizard

ROOT = pathlib.Path(__file__).resolve().parents[2]
LONGEST = 120
FOLDERS = ("src", "tools", "python")
SUFFIXES = {".c", ".cc", ".h", ".hpp", ".cu", ".py"}


def sources():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and "_test" not in path.stem:
                yield path


def too_long(paths, root=ROOT):
    """(where, function, lines) of each function in paths over LONGEST lines."""
    found = []
    for path in paths:
        for function in lizard.analyze_file(str(path)).function_list:
            if function.length > LONGEST:
                where = f"{path.relative_to(root)}:{function.start_line}"
                found.append((where, function.name, function.length))
    return found


def test_no_function_is_longer_than_a_reader_can_hold():
    found = too_long(sources())
    assert not found, "split these, each into steps a reader can hold:\n" + "\n".join(
        f"  {where}: {name} ({lines} lines, over {LONGEST})" for where, name, lines in found)


def test_the_measure_finds_a_long_function(tmp_path):
    """The check above is no check if lizard counted nothing: a C function
    and a Python one made longer than the limit on purpose are both found."""
    body = "".join(f"  x += {i};\n" for i in range(LONGEST + 5))
    (tmp_path / "long.c").write_text(f"int long_one(int x)\n{{\n{body}  return x;\n}}\n")
    py_body = "".join(f"    x += {i}\n" for i in range(LONGEST + 5))
    (tmp_path / "long.py").write_text(f"def long_one(x):\n{py_body}    return x\n")
    names = sorted(name for _, name, _ in too_long(sorted(tmp_path.iterdir()), tmp_path))
    assert names == ["long_one", "long_one"]

