"""Kubernetes (CRI) records of one long line joined back into it (engine.crilines, in ingest.iter_chunks)."""

import json

from engine.crilines import CriJoiner
from engine.ingest import ReadReport, iter_chunks
from tests.helpers.corpora import l4
from tests.helpers.jobs import write_rank

TS = "2026-11-19T02:29:21.{:09d}Z"


def _records(text: str, size: int, stream: str = "stderr", start: int = 0) -> list[str]:
    """`text` as the CRI records a runtime with a `size`-byte buffer writes."""
    parts = [text[i:i + size] for i in range(0, len(text), size)] or [""]
    return [f"{TS.format(start + i)} {stream} {'P' if i < len(parts) - 1 else 'F'} {p}"
            for i, p in enumerate(parts)]


def _lines(path, chunk: int = 1 << 20) -> tuple[list[str], ReadReport]:
    report = ReadReport()
    out = [ln.decode() for c in iter_chunks(str(path), report, chunk) for ln in c.lines()]
    return out, report


def test_partial_records_become_one_line_with_the_first_records_stamp(tmp_path):
    long = "RuntimeError: CUDA error: an illegal memory access was encountered " + "x" * 300
    lines = [f"{TS.format(0)} stdout F step 1 loss 2.5", *_records(long, 64, start=1),
             f"{TS.format(99)} stdout F step 2 loss 2.4"]
    path = write_rank(tmp_path / "rank-0.log", lines, gz=True)
    got, report = _lines(path, chunk=128)  # the run crosses many blocks
    assert got == [lines[0], f"{TS.format(1)} stderr P {long}", lines[-1]]
    assert report.long_lines_cut == 0


def test_files_without_partial_records_pass_unchanged(tmp_path):
    lines = ["plain line P one", f"{TS.format(0)} stdout F whole", "2026-11-19 10:00:00 INFO stdout P x"]
    got, _ = _lines(write_rank(tmp_path / "r.log", lines))
    assert got == lines


def test_a_run_that_never_ends_is_kept_and_one_past_the_cap_is_cut():
    j = CriJoiner(max_line=100)
    assert j.join(f"{TS.format(0)} stdout P abc".encode()) is None
    other = b"a line of another shape"
    assert j.join(other) == f"{TS.format(0)} stdout P abc\n".encode() + other
    assert j.join("\n".join(_records("y" * 500, 40)[:-1]).encode()) is None  # no F yet: held back
    assert j.join(f"{TS.format(5)} stdout P zz".encode()) is None
    rest = j.finish()
    assert rest is not None and len(rest) == 100 and rest.endswith(b"y")
    assert j.cut == 1 and j.finish() is None


def test_a_split_root_cause_line_is_shown_whole_by_l4_diagnose(tmp_path):
    job = tmp_path / "job"
    err = ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
           "unhandled system error")
    for node in range(2):
        lines = [f"{TS.format(i)} stdout F [rank{node}] step {i} loss 2.{i}" for i in range(1, 30)]
        if node == 1:
            lines += _records(err + " (run with NCCL_DEBUG=INFO for details) " + "detail " * 40, 50, start=40)
        write_rank(job / f"node-{node}" / "rank-0.log", lines, gz=True)
    (job / "job.json").write_text(json.dumps({"job_id": "cri", "status": "failed"}))
    run = l4("diagnose", str(job), "--no-match", "--format", "json")
    assert run.returncode == 0, run.stderr
    shown = json.dumps(json.loads(run.stdout)["events"])
    assert err in shown
