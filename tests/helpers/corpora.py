"""Reading generated labelled corpora in tests: a file's lines as the engine reads them, a job's lines, a
corpus's bytes (determinism), and the `l4` command in a subprocess."""

from __future__ import annotations

import gzip
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.helpers.wait import WAIT


def file_lines(path: Path) -> list[str]:
    """The lines of a log file (a .gz one decompressed), each without its carriage return."""
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    text = data.decode("utf-8", "surrogateescape")
    return [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]


def job_lines(job: Path) -> set[str]:
    """Every line of every log file under `job` (job.json left out)."""
    return {ln for p in job.rglob("*") if p.is_file() and p.name != "job.json" for ln in file_lines(p)}


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under `root` by its relative path: two corpora of one seed compare equal."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def l4(*args: str) -> subprocess.CompletedProcess:
    """`l4 ARGS…` in a subprocess of this interpreter, its output captured."""
    code = "from bot.cli import run; run()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=WAIT)


def missing_labelled_lines(case: Path, truth: dict) -> list[str]:
    """The lines a case's truth labels (root, context, cascade, indicating) that its failed job lacks."""
    lines = job_lines(case / "failed")
    labelled = truth["root_lines"] + truth["context_lines"] + truth["cascade_lines"]
    labelled += [ln for g in truth["indicating"] for ln in g["lines"]]
    return [ln for ln in labelled if ln not in lines]


def assert_same_seed_same_bytes(generate: Callable[[Path, int, int], object], tmp_path: Path) -> None:
    """A generator writes the same bytes for the same seed and other bytes for another."""
    generate(tmp_path / "a", 2, 3)
    generate(tmp_path / "b", 2, 3)
    generate(tmp_path / "c", 2, 4)
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
    assert tree_bytes(tmp_path / "a") != tree_bytes(tmp_path / "c")
