"""summary.json's schema holds a run's summary, and only that: a field the
runner drops, renames or adds without the schema fails it."""

import json
import subprocess
import sys

import summaries
from test_run import ENV, HEAD, ROOT, TWO_TIMERS


def test_a_runs_summary_is_as_its_schema_says_and_a_changed_one_is_not(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(HEAD.format(name="schema") + TWO_TIMERS)
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "rtaccel.cli", "run", str(path), "--duration", "1", "--out", str(out),
                    "--quiet"], cwd=ROOT, env=ENV, capture_output=True, timeout=120)
    doc = json.loads((out / "summary.json").read_text())
    assert summaries.problems(doc) == []
    assert summaries.written_by_runs(tmp_path) == [out / "summary.json"]
    dropped = dict(doc)
    del dropped["timers"]
    assert summaries.problems(dropped) == ["(the document): 'timers' is a required property"]
    added = dict(doc, chains=[dict(doc["chains"][0], latency_us=1.0)])
    assert summaries.problems(added) == ["chains/0: Additional properties are not allowed ('latency_us' was unexpected)"]
    retyped = dict(doc, duration_s="1")
    assert summaries.problems(retyped) == ["duration_s: '1' is not of type 'number'"]
