"""summary.json against its schema (python/rtaccel/schemas/summary.schema.json),
the contract between the runner, its one writer, and every reader.

The suite holds every run's summary to it: after each test, each
summary.json under the test's tmp_path that rtaccel-exec wrote (a whole
document: it has the runner's `executors`; the hand-made ones some tests
write to feed compare are parts of one) is validated; and test_run.py's
run() validates the summary of each run it makes, whole or not."""

import json
import pathlib

import jsonschema
import pytest

from rtaccel import runner

SCHEMA = json.loads(runner.SUMMARY_SCHEMA.read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def problems(doc: dict) -> list[str]:
    """What in DOC is not as the schema says, one line each."""
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(the document)'}: {e.message}"
            for e in sorted(VALIDATOR.iter_errors(doc), key=lambda e: list(e.absolute_path))]


def check(path: pathlib.Path) -> None:
    """Fails the test where PATH, a run's summary.json, is not its schema's."""
    if found := problems(json.loads(path.read_text())):
        pytest.fail(f"{path} is not as its schema says:\n  " + "\n  ".join(found[:20]), pytrace=False)


def written_by_runs(root: pathlib.Path) -> list[pathlib.Path]:
    """The summary.json files under ROOT that a run wrote."""
    found = []
    for path in root.rglob("summary.json"):
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and "executors" in doc:
            found.append(path)
    return found
