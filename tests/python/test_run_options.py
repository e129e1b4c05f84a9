"""A run's options are one table (src/exec/run_options.h): `rtaccel run`'s
parser, the command line it hands rtaccel-exec and rtaccel-exec's own parser
are all made from it, so that an option added there is in all three."""

import subprocess

from rtaccel import _core, runner
from rtaccel.cli import build_parser

from test_run import EXEC

# A value each option that takes one accepts, where its default is none.
SAMPLES = {"socket": "/tmp/s.sock", "trace-events": "5000", "walk": "64:stream:1.5",
           "best-effort": "sleep 1", "shim": "pi", "fail-link": "eth0@1", "server": "/bin/true",
           "isolate": "/bin/true", "epsilon-floor-us": "40", "kappa-floor-us": "50", "jitter-floor-us": "60",
           "link-kernel-floor-ns-per-kb": "7"}


def sample(spec):
    return spec["default"] or spec["alone"] or SAMPLES[spec["name"]]


def test_every_option_is_in_rtaccel_execs_usage_and_takes_its_sample():
    usage = subprocess.run([str(EXEC), "--help"], capture_output=True, text=True, check=True).stdout
    for spec in runner.exec_options():
        assert f"--{spec['name']}" in usage, spec["name"]
        if spec["value"]:
            assert _core.check_run_option(spec["name"], sample(spec)) is None, spec["name"]
            assert _core.check_run_option(spec["name"], "") is not None, spec["name"]


def test_what_rtaccel_run_is_given_is_what_it_hands_rtaccel_exec():
    # Each option a user gives, through `rtaccel run`'s parser and into
    # rtaccel-exec's command line, as it was given.
    parser = build_parser()
    for spec in runner.exec_options():
        if not spec["for_users"]:
            continue
        given = [f"--{spec['name']}"] + ([sample(spec)] if spec["value"] else [])
        args = parser.parse_args(["run", "w.yaml", *given])
        handed = runner.exec_argv(**{dest: getattr(args, dest) for dest in _dests()})
        at = handed.index(f"--{spec['name']}")
        assert handed[at:at + len(given)] == given, (spec["name"], handed)


def test_what_rtaccel_gives_itself_is_not_offered_to_users():
    parser = build_parser()
    help_text = parser.parse_known_args(["run", "w.yaml"])[0]
    assert not hasattr(help_text, "epsilon_floor_us")
    assert runner.exec_argv(epsilon_floor_us=40.5) == ["--epsilon-floor-us", "40.5"]
    assert runner.exec_argv(gang=False, quiet=True) == ["--no-gang", "--quiet"]


def _dests():
    from rtaccel.commands.run import exec_dests
    return exec_dests()
