"""Reading generated labelled corpora in tests: a file's lines as the engine reads them, a job's lines, a
corpus's bytes (determinism), and the `l4` command in a subprocess."""

from __future__ import annotations

import gzip
import subprocess
import sys
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
