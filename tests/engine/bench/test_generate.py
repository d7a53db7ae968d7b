import gzip
import json
import random
import re
from pathlib import Path

import pytest

from engine.bench.generate import (
    FAULT_KINDS,
    FAULTS,
    STYLES,
    generate_case,
    generate_large_job,
    generate_suite,
)

SMALL = {"nodes": (2, 4), "ranks_per_node": (2, 3), "iterations": (10, 20), "history_jobs": 2}


def _read(p: Path) -> str:
    raw = p.read_bytes()
    return (gzip.decompress(raw) if p.suffix == ".gz" else raw).decode()


def _job_lines(job_dir: Path) -> set[str]:
    lines: set[str] = set()
    for p in job_dir.rglob("*"):
        if p.is_file() and p.name != "job.json":
            lines.update(_read(p).split("\n"))
    return lines


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    out = tmp_path_factory.mktemp("suite")
    return out, generate_suite(out, len(FAULT_KINDS) * 2, seed=7, **SMALL)


def test_kinds_and_styles() -> None:
    assert len(FAULT_KINDS) >= 14
    assert STYLES == ["megatron", "deepspeed", "mindspore"]
    for kind in FAULT_KINDS:
        assert set(FAULTS[kind]["styles"]) <= set(STYLES)


def test_determinism(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    generate_suite(a, 4, seed=3, **SMALL)
    generate_suite(b, 4, seed=3, **SMALL)
    ta, tb = _tree(a), _tree(b)
    assert ta.keys() == tb.keys()
    assert all(ta[k] == tb[k] for k in ta)
    c = tmp_path / "c"
    generate_suite(c, 4, seed=4, **SMALL)
    assert _tree(c) != ta


def test_suite_index_covers_every_kind(suite: tuple[Path, list[Path]]) -> None:
    out, dirs = suite
    index = json.loads((out / "cases.json").read_text())
    assert [e["case_id"] for e in index] == [d.name for d in dirs]
    assert {e["kind"] for e in index} == set(FAULT_KINDS)
    for e in index:
        assert e["style"] in FAULTS[e["kind"]]["styles"]


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_every_kind_generates(tmp_path: Path, kind: str) -> None:
    for style in FAULTS[kind]["styles"]:
        d = tmp_path / f"{kind}-{style}"
        truth = generate_case(d, kind, style, random.Random(kind + style), nodes=3, ranks_per_node=2,
                              iterations=12, history_jobs=1)
        assert truth == json.loads((d / "truth.json").read_text())
        assert truth["kind"] == kind and truth["style"] == style
        assert truth["category"] == FAULTS[kind]["category"]
        assert truth["stage"] in ("init", "data_loading", "model_loading", "training", "checkpointing")
        assert truth["indicating"] and all(g["lines"] for g in truth["indicating"])
        if FAULTS[kind]["faulty_node"]:
            assert len(truth["faulty_nodes"]) == 1 and (d / "failed" / truth["faulty_nodes"][0]).is_dir()
        else:
            assert truth["faulty_nodes"] == []
        if truth["stage"] in ("training", "checkpointing"):
            assert isinstance(truth["iteration"], int)
        else:
            assert truth["iteration"] is None
        present = _job_lines(d / "failed")
        for g in truth["indicating"]:
            assert set(g["lines"]) <= present
        assert set(truth["cascade_lines"]) <= present


def test_truth_lines_verbatim(suite: tuple[Path, list[Path]]) -> None:
    _, dirs = suite
    for d in dirs:
        truth = json.loads((d / "truth.json").read_text())
        present = _job_lines(d / "failed")
        ind = [ln for g in truth["indicating"] for ln in g["lines"]]
        missing = [ln for ln in ind + truth["cascade_lines"] if ln not in present]
        assert not missing, (d.name, missing[:3])
        assert not set(ind) & set(truth["cascade_lines"])


def test_gzip_files_valid(suite: tuple[Path, list[Path]]) -> None:
    out, _ = suite
    gz = list(out.rglob("*.log.gz"))
    assert gz
    for p in gz:
        assert gzip.decompress(p.read_bytes())


def test_history_succeeded_same_settings(suite: tuple[Path, list[Path]]) -> None:
    _, dirs = suite
    for d in dirs:
        failed = json.loads((d / "failed" / "job.json").read_text())
        assert failed["status"] == "failed" and failed["job_id"] == d.name
        hist = sorted((d / "history").iterdir())
        assert len(hist) == 2
        for h in hist:
            job = json.loads((h / "job.json").read_text())
            assert job["status"] == "succeeded"
            assert job["settings"] == failed["settings"]
            assert list(h.glob("*/rank-*.log*"))


def test_node_crash_truncates_faulty_node(tmp_path: Path) -> None:
    truth = generate_case(tmp_path / "c", "node_crash", "megatron", random.Random(1), nodes=4,
                          ranks_per_node=2, iterations=20, history_jobs=0)
    node_dir = tmp_path / "c" / "failed" / truth["faulty_nodes"][0]
    for p in node_dir.glob("rank-*"):
        assert not _read(p).endswith("\n")


def test_large_job_size(tmp_path: Path) -> None:
    size = 20 << 20
    out = generate_large_job(tmp_path / "big", size, seed=1)
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert abs(total - size) <= 0.1 * size
    assert json.loads((out / "job.json").read_text())["status"] == "failed"


def test_large_job_streams_the_same_bytes_as_an_in_memory_job(tmp_path, monkeypatch):
    from engine.bench.job import Job

    generate_large_job(tmp_path / "streamed", 3_000_000, seed=4)

    def eager(self, templates, rows):  # the bulk part rendered up front, written the plain way
        for row in rows():
            for r, tm in enumerate(templates):
                self.lines[r].append(tm % row)

    monkeypatch.setattr(Job, "add_bulk", eager)
    generate_large_job(tmp_path / "eager", 3_000_000, seed=4)
    streamed = sorted(p.relative_to(tmp_path / "streamed") for p in (tmp_path / "streamed").rglob("*.log"))
    assert streamed and streamed == sorted(p.relative_to(tmp_path / "eager")
                                           for p in (tmp_path / "eager").rglob("*.log"))
    for rel in streamed:
        assert (tmp_path / "streamed" / rel).read_bytes() == (tmp_path / "eager" / rel).read_bytes()


def test_unique_tokens_profile_makes_every_bulk_line_distinct_but_few_keys(tmp_path: Path) -> None:
    from engine.ingest import discover
    from engine.scan import scan_file

    out = generate_large_job(tmp_path / "uniq", 3_000_000, seed=2, profile="unique-tokens")
    f = max(discover(out).files, key=lambda f: f.size)
    lines = Path(f.path).read_bytes().splitlines()
    assert len(set(lines)) > 0.95 * len(lines)
    assert sum(b"0x" in ln for ln in lines) > len(lines) / 3  # pointers, comm ids, object reprs
    assert len(scan_file(f).keys) < 80


def test_opt_in_kinds_are_generated_only_when_named(tmp_path: Path) -> None:
    from engine.bench.generate import OPT_IN_KINDS

    assert {"straggler", "fabric_stall"} <= set(OPT_IN_KINDS) and not set(OPT_IN_KINDS) & set(FAULT_KINDS)
    index = generate_suite(tmp_path / "s", 3, seed=1, **SMALL, kinds=["straggler"])
    assert len(index) == 3


@pytest.mark.parametrize("style", STYLES)
def test_straggler_falls_behind_then_the_others_time_out(tmp_path: Path, style: str) -> None:
    d = tmp_path / style
    truth = generate_case(d, "straggler", style, random.Random("slow" + style), nodes=4, ranks_per_node=2,
                          iterations=30, history_jobs=1)
    assert truth["kind"] == "straggler" and truth["category"] == "hardware/node"
    assert truth["stage"] == "training"
    (node,) = truth["faulty_nodes"]
    watchdog = [ln for e in truth["indicating"] for ln in e["lines"]]
    assert watchdog and all(node not in ln for ln in watchdog)  # the slow ranks print no watchdog timeout
    step = re.compile(r"(?:iteration|step[=:]?) ?(\d+)")
    last = {}
    for p in (d / "failed").rglob("rank-*.log*"):
        its = [int(m.group(1)) for ln in _read(p).split("\n") for m in [step.search(ln)] if m]
        last[p.parent.name, p.name] = max(its)
    slow = min(last.values())
    assert slow == truth["iteration"] - 1  # the slow ranks never finish the step the truth names
    assert max(last.values()) - slow >= 1
    assert {k[0] for k, v in last.items() if v == slow} == {node}
