"""`rtaccel-isolate regulate`'s options are one table
(src/isolate/regulate_options.h): rtaccel-isolate's getopt_long array, its
usage and its parsing are made from it. What is written elsewhere is held to
it here: the command line a run hands the regulator (exec/run.h
regulator_args, and the --ready-fd of its start-up handshake), the paragraph
of docs/isolate.md that lists the options, and the campaign's regulator
(tools/gpu/campaign.sh). An option in one of them and not in another fails.
(The docs' `rtaccel isolate regulate` commands are test_docs.py's: it holds
them to the usage.)"""

import re
import shlex
import subprocess

import needs
from conftest import ROOT
from rtaccel import _core

ISOLATE = ROOT / "python" / "rtaccel" / "lib" / "rtaccel-isolate"
pytestmark = needs.mark("build", not ISOLATE.exists(), "rtaccel-isolate not built (make build)")

OPTIONS = {spec["name"]: spec for spec in _core.regulate_options()}
# Per option that takes a value: one it takes, and one it refuses.
SAMPLES = {"cores": ("1,3-5", "1-"), "period-us": ("1000", "5"), "meter": ("raw:4:0x412e", "magic"),
           "cgroup": ("rtaccel-be", ""), "bwlock": ("default", "x" * 64), "gang": ("run-1", "x" * 64),
           "threshold": ("200", "lots"), "be-peak-mbps": ("10000", "0"), "tfs": ("0.5", "-1"),
           "park-priority": ("1", "100"), "duration": ("2.5", "0"), "summary": ("-", ""),
           "trace": ("regulator.trace.json", ""), "ready-fd": ("9", "-1")}


def check(argv, where, values=True):
    """Each --NAME in ARGV (regulate's options, nothing else) is a row of the
    table, and the value after it one the row takes (with VALUES: where they
    are a shell's to expand, only there)."""
    at = 0
    while at < len(argv):
        word = argv[at]
        assert word.startswith("--") and word[2:] in OPTIONS, f"{where}: {word!r} is no option of the table"
        spec = OPTIONS[word[2:]]
        if spec["value"]:
            at += 1
            assert at < len(argv), f"{where}: {word} without its {spec['value']}"
            assert not values or _core.check_regulate_option(spec["name"], argv[at]) is None, (where, word, argv[at])
        at += 1


def test_names_are_once_and_each_takes_its_sample_and_refuses_a_bad_value():
    assert len(OPTIONS) == len(_core.regulate_options())
    assert set(SAMPLES) == {name for name, spec in OPTIONS.items() if spec["value"]}
    for name, spec in OPTIONS.items():
        if spec["value"]:
            good, bad = SAMPLES[name]
            assert _core.check_regulate_option(name, good) is None, name
            why = _core.check_regulate_option(name, bad)
            assert why and why.startswith(f"--{name} takes "), (name, why)
        else:
            assert _core.check_regulate_option(name, "") is None, name
    assert _core.check_regulate_option("no-such-option", "1") == "no option --no-such-option"


def test_the_usage_lists_every_option_in_the_tables_order():
    for argv in (["--help"], ["regulate", "--help"]):
        r = subprocess.run([str(ISOLATE), *argv], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        section = r.stdout.split("regulate's OPTIONS:\n", 1)[1].split("\n\n", 1)[0]
        listed = re.findall(r"^  --([a-z0-9-]+)(?: ([A-Z]\S*))?", section, re.M)
        assert listed == [(s["name"], s["value"] or "") for s in OPTIONS.values()], argv


def test_the_docs_paragraph_names_every_option_and_no_other():
    text = (ROOT / "docs" / "isolate.md").read_text()
    paragraph = text.split("`rtaccel-isolate regulate` options", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`--([a-z0-9-]+)", paragraph))
    assert named == set(OPTIONS), (sorted(set(OPTIONS) - named), sorted(named - set(OPTIONS)))


def test_what_a_run_hands_the_regulator_is_in_the_table():
    examples = [p for p in sorted((ROOT / "examples").glob("*.yaml"))
                if re.search(r"^isolation:", p.read_text(), re.M)]
    assert examples
    handed = set()
    for path in examples:
        workload = _core.load_workload(str(path))
        for gang in (False, True):
            argv = _core.regulator_args(workload, gang, "run-42", "rtaccel-run-42", "out")
            assert argv[0] == "regulate", argv
            check(argv[1:], f"{path.name} (gang {gang})")
            handed |= {w for w in argv if w.startswith("--")}
    assert {"--cores", "--gang", "--own-cgroup", "--stopped-by-parent"} <= handed, handed
    # The start-up handshake (core/daemon.h, ready_handshake) adds it.
    check(["--ready-fd", "9"], "core::SpawnOptions::ready_handshake")


def test_the_campaigns_regulator_is_in_the_table():
    text = (ROOT / "tools" / "gpu" / "campaign.sh").read_text().replace("\\\n", " ")
    commands = re.findall(r'rtaccel-isolate"? regulate (.*)', text)
    assert commands
    for command in commands:
        words = shlex.split(command.split("&")[0].split("|")[0])
        check(words, "tools/gpu/campaign.sh", values=False)
