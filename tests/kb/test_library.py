from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from sqlmodel import func, select

from engine.model import CATEGORIES
from kb import db as kbdb
from kb import library
from kb.matcher import Matcher
from kb.models import FaultPattern, KbMeta
from kb.patterns_io import validate_pattern_dict
from kb.signatures import normal_lines

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "real_cases_dev.jsonl"
REQUIRED_IDS = {
    "nccl-watchdog-timeout", "nccl-ib-completion-error", "nccl-unhandled-system-error",
    "nccl-remote-process-exited", "nccl-duplicate-gpu", "cuda-uncorrectable-ecc",
    "cuda-illegal-memory-access", "cuda-unspecified-launch-failure", "cublas-execution-failed",
    "cuda-out-of-memory", "loss-nan-inf", "loss-scale-minimum", "disk-full", "permission-denied",
    "file-not-found", "checkpoint-stream-writer-failed", "nvidia-driver-too-old",
    "cuda-driver-insufficient", "undefined-symbol", "ascend-stream-mode-driver",
    "parallelism-divisibility-assertion", "hccl-ei0002-notify-wait-timeout",
    "hccl-ei0004-ranktable-invalid", "hccl-ei0005-inconsistent-arguments",
    "hccp-ej0001-init-failed-previous-process", "hccp-ej0002-environment-error",
    "hccp-ej0003-port-in-use", "hccp-ej0004-network-setup-error", "hccl-error-cqe-status",
    "worker-sigkill-host-oom", "torchrun-child-failed", "rendezvous-timeout",
    "dataloader-worker-killed", "slurm-preemption", "slurm-time-limit", "nic-link-down",
}
REQUIRED_XIDS = [13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 109, 119, 120, 137, 145, 149]


def test_library_size_versions_and_fields() -> None:
    files = library.read_library()
    assert all(f.version >= 1 for f in files)
    pats = library.builtin_patterns()
    assert len(pats) >= 60
    ids = {p["id"] for p in pats}
    assert REQUIRED_IDS <= ids, REQUIRED_IDS - ids
    for n in REQUIRED_XIDS:
        assert any(i.startswith(f"xid-{n}-") for i in ids), n
    for p in pats:
        assert p["category"] in CATEGORIES and p["kind"] in ("root", "cascade")
        assert p["remediation"] and p["signature"]
    by_id = {p["id"]: p for p in pats}
    assert by_id["nccl-watchdog-timeout"]["kind"] == "cascade"
    assert by_id["torchrun-child-failed"]["kind"] == "cascade"


def test_library_patterns_pass_user_validation() -> None:
    """Every built-in signature would also be accepted from an SRE (not too broad)."""
    for p in library.builtin_patterns():
        validate_pattern_dict(p)


def test_library_matches_no_normal_line() -> None:
    m = Matcher(library.builtin_patterns())
    hits = {line: [x.pattern_id for x in m.match_lines([line])] for line in normal_lines()}
    assert {k: v for k, v in hits.items() if v} == {}


def test_xid_number_not_confused_with_pci_address() -> None:
    m = Matcher(library.builtin_patterns())
    line = "NVRM: Xid (PCI:0000:79:00): 13, Graphics Exception: ESR 0x1"
    got = [x.pattern_id for x in m.match_lines([line])]
    assert got == ["xid-13-graphics-engine-exception"]
    got = [x.pattern_id for x in m.match_lines(["kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=python3,"
                                                " Ch 00000001 caused by previous Xid 149"])]
    assert got[0] == "xid-149-nvlink-netir-error" and "xid-45-preemptive-cleanup" in got


def category_accuracy() -> tuple[int, int, list[str]]:
    m = Matcher(library.builtin_patterns())
    ok = total = 0
    misses = []
    for line in FIXTURE.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if case["label_basis"].startswith("weak"):
            continue
        total += 1
        found = m.match_lines(case["indicating_lines"] + case["context_lines"])
        if found and found[0].category == case["category"]:
            ok += 1
        else:
            misses.append(f"{case['id']}: want {case['category']}, got "
                          f"{[(x.pattern_id, x.category) for x in found]}")
    return ok, total, misses


def test_category_accuracy_on_real_cases(capsys: pytest.CaptureFixture[str]) -> None:
    ok, total, misses = category_accuracy()
    with capsys.disabled():
        print(f"\nbuilt-in library: {ok}/{total} non-weak real cases matched with the right category "
              f"({ok / total:.1%}); misses: {misses}")
    assert total >= 20
    assert ok / total >= 0.90, misses


def test_load_into_fresh_database(sqlite_engine) -> None:  # noqa: ANN001
    with kbdb.session(sqlite_engine) as s:
        rows = s.exec(select(FaultPattern)).all()
        assert len(rows) == len(library.builtin_patterns())
        assert {r.source for r in rows} == {"builtin"}
        metas = {m.key: m.value for m in s.exec(select(KbMeta))}
        assert {f"library:{f.name}" for f in library.read_library()} <= set(metas)
        assert library.load(s) == {"added": 0, "updated": 0, "kept": 0, "files": 0}


def test_newer_library_updates_builtins_but_keeps_sre_work(sqlite_engine) -> None:  # noqa: ANN001
    with kbdb.session(sqlite_engine) as s:
        edited = s.get(FaultPattern, "disk-full")
        edited.title = "stale title from an older library"
        edited.enabled = False  # an SRE disabled it: must stay disabled
        s.add(edited)
        mine = s.get(FaultPattern, "cuda-out-of-memory")
        mine.source, mine.title = "confirmed", "SRE wording"
        s.add(mine)
        for meta in s.exec(select(KbMeta)):
            meta.value = "0"  # pretend the database holds an older library
            s.add(meta)
        removed = s.get(FaultPattern, "nic-link-down")
        s.delete(removed)
        s.commit()
        stats = library.load(s)
        s.commit()
        assert stats["added"] == 1 and stats["updated"] == 1 and stats["kept"] == 1
        edited = s.get(FaultPattern, "disk-full")
        assert edited.title == "No space left on device" and edited.version == 2 and not edited.enabled
        assert s.get(FaultPattern, "cuda-out-of-memory").title == "SRE wording"
        assert s.get(FaultPattern, "nic-link-down") is not None
        n = s.exec(select(func.count()).select_from(FaultPattern)).one()
        assert n == len(library.builtin_patterns())


def test_categories_spread() -> None:
    cats = Counter(p["category"] for p in library.builtin_patterns())
    assert set(cats) == set(CATEGORIES)
