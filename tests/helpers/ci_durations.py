"""Seconds per test file, read from a JUnit XML report of a whole run, as the YAML that
tests/ci_durations.yaml holds (tests/conftest.py orders the files of a run by it, longest first, so
that on pytest-xdist's ``--dist loadfile`` no long file starts last and keeps one worker busy alone):

    .venv/bin/python -m pytest -n 2 --dist loadfile --junitxml=/tmp/run.xml
    .venv/bin/python -m tests.helpers.ci_durations /tmp/run.xml > tests/ci_durations.yaml

``--replay`` prints instead what the two orders give on two workers for that run (each worker takes
the next file when it is free): xdist's by-test-count order against the longest-first one, and the
longest-first order on three workers (an upper bound of what `-n 3` gains: on two cores a third
worker also slows the other two wherever they compute rather than wait).

A file missing from the table (a new one) runs after the listed ones; a stale table only makes the
order worse, never a test wrong.
"""
from __future__ import annotations

import heapq
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def _per_file(junit_xml: Path) -> tuple[dict[str, float], Counter[str]]:
    per: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        parts = (case.get("classname") or "").split(".")
        module = [p for p in parts if not p[:1].isupper()]  # drop test classes
        if module:
            name = "/".join(module) + ".py"
            per[name] += float(case.get("time") or 0.0)
            count[name] += 1
    return dict(per), count


def seconds_per_file(junit_xml: Path) -> dict[str, float]:
    """{"tests/x/test_y.py": seconds} summed over the file's test cases (setup and teardown included)."""
    return _per_file(junit_xml)[0]


def makespan(order: list[str], seconds: dict[str, float], workers: int = 2) -> float:
    """When the last worker is done if each takes the next file of `order` as soon as it is free."""
    free = [0.0] * workers
    for name in order:
        heapq.heapreplace(free, free[0] + seconds[name])
    return max(free)


def main(argv: list[str]) -> int:
    replay = "--replay" in argv
    argv = [a for a in argv if a != "--replay"]
    if len(argv) != 1:
        print("usage: python -m tests.helpers.ci_durations [--replay] JUNIT.xml", file=sys.stderr)
        return 2
    per, count = _per_file(Path(argv[0]))
    if replay:
        total = sum(per.values())
        by_count = sorted(per, key=lambda n: -count[n])  # stable, like xdist's --loadscope-reorder
        longest = sorted(per, key=lambda n: -per[n])
        print(f"{sum(count.values())} tests, {total:.0f} s in all, half {total / 2:.0f} s, longest file "
              f"{max(per.values()):.0f} s; two workers: by test count {makespan(by_count, per):.0f} s, "
              f"longest first {makespan(longest, per):.0f} s; three workers, longest first: "
              f"{makespan(longest, per, 3):.0f} s (if a third worker slowed none of the others)")
        return 0
    print("# seconds per test file of one whole run (tests/helpers/ci_durations.py); longest first")
    for name, secs in sorted(per.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"{name}: {secs:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
