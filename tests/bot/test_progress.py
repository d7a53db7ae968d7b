"""The `l4 diagnose` progress bar: drawn on a terminal, quiet when piped or with --format json."""
from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from rich.console import Console

from bot.progress import diagnose_progress, wants_progress
from tests.helpers.jobs import make_job
from tests.helpers.wait import WAIT

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return make_job(tmp_path_factory.mktemp("progress") / "job-prog", nodes=3, fault_node=1)


def _run(job: Path, fmt: str, tmp_path: Path, *, tty: bool) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "L4_DATABASE_URL": f"sqlite:///{tmp_path / 'kb.db'}",
           "TERM": "xterm", "COLUMNS": "120"}
    cmd = [sys.executable, "-m", "bot.cli", "diagnose", str(job), "--no-match", "--format", fmt]
    if not tty:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=WAIT)
        return r.returncode, r.stdout, r.stderr
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave, env=env, text=True)
    os.close(slave)
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    out, _ = proc.communicate(timeout=WAIT)
    reader.join(timeout=10)
    os.close(master)
    return proc.returncode, out, b"".join(chunks).decode("utf-8", "replace")


def test_bar_on_a_terminal(job, tmp_path) -> None:
    rc, out, err = _run(job, "text", tmp_path, tty=True)
    assert rc == 0 and "Failure-indicating events" in out
    assert "files" in err and ("Reading logs" in err or "Analysing" in err)
    assert "Reading logs" not in out and "Analysing" not in out  # the bar stays off stdout


def test_quiet_when_piped_or_json(job, tmp_path) -> None:
    rc, out, err = _run(job, "text", tmp_path, tty=False)
    assert rc == 0 and "Reading logs" not in err and "Analysing" not in err
    rc, out, err = _run(job, "json", tmp_path, tty=True)
    assert rc == 0 and out.lstrip().startswith("{") and "Reading logs" not in err and "Analysing" not in err


def test_lines_every_few_seconds_when_no_bar_is_drawn(monkeypatch) -> None:
    import bot.progress as progress

    clock = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    buf = io.StringIO()
    cb = progress.LineProgress(buf, every=5.0)
    cb(1, 10, 1_000_000)  # too soon: silent
    clock[0] += 6
    cb(2, 10, 60_000_000)
    cb(3, 10, 90_000_000)  # too soon again
    clock[0] += 5
    cb.fetched(5_000_000, None)
    assert buf.getvalue().splitlines() == ["l4: 2/10 files read, 60.0 MB (10.0 MB/s, 6 s)",
                                           "l4: downloaded 5.0 MB"]
    monkeypatch.delenv("L4_PROGRESS_SECONDS")  # tests/conftest.py sets an hour
    with diagnose_progress(False) as plain:
        assert isinstance(plain, progress.LineProgress) and plain._every == 5.0


def test_the_line_interval_comes_from_the_environment(monkeypatch) -> None:
    import bot.progress as progress
    from bot.config import ConfigError

    monkeypatch.setenv("L4_PROGRESS_SECONDS", "0.5")
    with diagnose_progress(False) as plain:
        assert plain._every == 0.5
    monkeypatch.setenv("L4_PROGRESS_SECONDS", "soon")
    with pytest.raises(ConfigError, match="L4_PROGRESS_SECONDS must be a number"):
        progress.line_seconds()


def test_callback_draws_files_and_bytes() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with diagnose_progress(True, console) as cb:
        cb(1, 4, 1_500_000)
        cb(4, 4, 6_000_000)
    text = buf.getvalue()
    assert "4/4 files" in text and "6.0 MB" in text
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    with diagnose_progress(True, console) as cb:
        cb.fetched(1_000, None)  # size unknown at first
        cb.fetched(2_000_000, 8_000_000)
        cb(2, 2, 9_000_000)
    text = buf.getvalue()
    assert "Downloading logs" in text and "2.0 MB of 8.0 MB" in text and "2/2 files" in text
    assert not wants_progress("json", sys.stderr) and not wants_progress("text", io.StringIO())
