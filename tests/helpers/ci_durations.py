"""Seconds per test file, read from a JUnit XML report of a whole run, as the YAML that
tests/ci_durations.yaml holds (tests/conftest.py orders the files of a run by it, longest first, so
that on pytest-xdist's ``--dist loadfile`` no long file starts last and keeps one worker busy alone):

    .venv/bin/python -m pytest -n 2 --dist loadfile --junitxml=/tmp/run.xml
    .venv/bin/python -m tests.helpers.ci_durations /tmp/run.xml > tests/ci_durations.yaml

A file missing from the table (a new one) runs after the listed ones; a stale table only makes the
order worse, never a test wrong.
"""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def seconds_per_file(junit_xml: Path) -> dict[str, float]:
    """{"tests/x/test_y.py": seconds} summed over the file's test cases (setup and teardown included)."""
    per: Counter[str] = Counter()
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        module = [p for p in parts if not p[:1].isupper()]  # drop test classes
        if module:
            per["/".join(module) + ".py"] += float(case.get("time") or 0.0)
    return dict(per)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tests.helpers.ci_durations JUNIT.xml", file=sys.stderr)
        return 2
    per = seconds_per_file(Path(argv[0]))
    print("# seconds per test file of one whole run (tests/helpers/ci_durations.py); longest first")
    for name, secs in sorted(per.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{name}: {secs:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
