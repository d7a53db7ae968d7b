"""The committed real-run corpus (tests/fixtures/realrun, made by `l4 bench realrun generate`) is well
formed: root lines verbatim in the rank files, a split, a known kind, history to compare with."""

import gzip
import json
import re
from collections import Counter
from pathlib import Path

from bot.cli import main
from engine.bench.evaluate import case_dirs, evaluate
from engine.bench.realrun.check import check_case, check_corpus, read_lines
from engine.bench.realrun.plan import (
    STYLES,
    WAVE3_STYLES,
    WAVE5_STYLES,
    WAVE6_STYLES,
    WAVE7_STYLES,
    kinds,
    split_of,
)

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realrun"
STAGES = {"init", "data_loading", "model_loading", "training", "checkpointing", "teardown"}


def _truths() -> list[dict]:
    return [json.loads((c / "truth.json").read_text()) for c in case_dirs(CORPUS)]


def test_every_committed_case_is_well_formed():
    assert check_corpus(CORPUS) == []
    index = json.loads((CORPUS / "cases.json").read_text())
    assert {r["case_id"] for r in index} == {c.name for c in case_dirs(CORPUS)}


def test_the_corpus_covers_kinds_stages_styles_splits_and_clocks():
    truths = _truths()
    assert len({t["kind"] for t in truths}) >= 14
    assert {t["kind"] for t in truths} <= set(kinds()["kinds"])
    assert {t["stage"] for t in truths} == STAGES
    assert {t["source"] for t in truths} == {f"realrun/{s}" for s in STYLES}
    # the held-out wave 2: other step counts, [rankN]: prefixes, unstamped nodes; halves by name hash
    wave2 = [t for t in truths if t.get("wave") == 2]
    assert len(wave2) >= 20 and {t["prefix"] for t in wave2} == {"default", "rank"}
    assert any(n["timestamps"] == "none" for t in wave2 for n in t["nodes"].values())
    assert all(t["split"] == split_of(t["case_id"]) for t in wave2)
    # the held-out wave 3: every kind, in the two styles no earlier wave ran, halves by name hash
    wave3 = [t for t in truths if t.get("wave") == 3]
    assert {t["kind"] for t in wave3} == set(kinds()["kinds"])
    assert {t["style"] for t in wave3} == set(WAVE3_STYLES)
    assert not {t["style"] for t in truths if t.get("wave", 1) < 3} & set(WAVE3_STYLES)
    assert all(t["split"] == split_of(t["case_id"]) for t in wave3)
    assert {t["split"] for t in wave3} == {"dev", "test"}
    # the held-out wave 5: every kind, in the two styles no earlier wave ran, some runs restarted by torchrun
    wave5 = [t for t in truths if t.get("wave") == 5]
    assert {t["kind"] for t in wave5} == set(kinds()["kinds"])
    assert {t["style"] for t in wave5} == set(WAVE5_STYLES)
    assert not {t["style"] for t in truths if t.get("wave", 1) < 5} & set(WAVE5_STYLES)
    assert all(t["split"] == split_of(t["case_id"]) for t in wave5)
    assert {t["split"] for t in wave5} == {"dev", "test"}
    restarted = [t for t in wave5 if t.get("restarts")]
    assert len(restarted) >= len(wave5) // 4
    assert all(t.get("restarts", 0) == 0 for t in truths if t.get("wave") not in (5, 6))
    for t in restarted:  # torchrun's restart lines and a second attempt are in the logs
        lines = read_lines(CORPUS / t["case_id"] / "failed")
        assert any("will restart worker group" in ln for ln in lines), t["case_id"]
    _wave6(truths)
    _wave7(truths)
    assert Counter(t["split"] for t in truths).keys() == {"dev", "test"}
    assert all(t["world_size"] >= 8 and len(t["nodes"]) >= 4 for t in truths)
    zones = {(n["tz"], n["timestamps"]) for t in truths for n in t["nodes"].values()}
    assert ("Asia/Shanghai", "iso_offset") in zones and any(fmt == "naive" for _, fmt in zones)
    for t in truths:  # the root of a failure is never also labelled a consequence
        assert not set(t["root_lines"]) & set(t["cascade_lines"])


def _wave6(truths: list[dict]) -> None:
    """The held-out wave 6: every kind in its two styles only, srun -l consoles, restarts that recur."""
    wave6 = [t for t in truths if t.get("wave") == 6]
    assert {t["kind"] for t in wave6} == set(kinds()["kinds"])
    assert {t["style"] for t in wave6} == set(WAVE6_STYLES)
    assert not {t["style"] for t in truths if t.get("wave", 1) < 6} & set(WAVE6_STYLES)
    assert all(t["split"] == split_of(t["case_id"]) for t in wave6)
    assert {t["split"] for t in wave6} == {"dev", "test"}
    slurm = [t for t in wave6 if t["layout"] == "slurm"]
    assert len(slurm) >= len(wave6) // 4
    assert all(t["layout"] != "slurm" for t in truths if t.get("wave") not in (6, 7))
    for t in slurm:  # one srun -l console per node; its root lines carry a task label
        files = sorted((CORPUS / t["case_id"] / "failed").rglob("*.gz"))  # (a node that never came: none)
        assert all(f.name.startswith("slurm-") for f in files), t["case_id"]
        assert len({f.parent for f in files}) == len(files) >= len(t["nodes"]) - 1, t["case_id"]
    restarted = [t for t in wave6 if t.get("restarts")]
    assert len(restarted) >= len(wave6) // 4
    for t in restarted:  # the second attempt reaches the fault again: a root line after the restart
        pats = [re.compile(p) for p in kinds()["kinds"][t["kind"]]["root_patterns"]]
        later = []
        for f in (CORPUS / t["case_id"] / "failed").rglob("*.gz"):
            lines = gzip.decompress(f.read_bytes()).decode("utf-8", "replace").split("\n")
            if "/attempt_" in f.as_posix():
                later += lines if "/attempt_1/" in f.as_posix() else []
            else:
                at = [i for i, ln in enumerate(lines) if "will restart worker group" in ln]
                later += lines[at[0]:] if at else []
        assert any(p.search(ln) for p in pats for ln in later), t["case_id"]


def _wave7(truths: list[dict]) -> None:
    """The held-out wave 7: every kind in its two styles only (tensor parallel with DTensor, a TorchTune-like
    recipe), no restarts."""
    wave7 = [t for t in truths if t.get("wave") == 7]
    assert {t["kind"] for t in wave7} == set(kinds()["kinds"])
    assert {t["style"] for t in wave7} == set(WAVE7_STYLES)
    assert not {t["style"] for t in truths if t.get("wave", 1) < 7} & set(WAVE7_STYLES)
    assert all(t["split"] == split_of(t["case_id"]) for t in wave7)
    assert {t["split"] for t in wave7} == {"dev", "test"}
    assert not any(t.get("restarts") for t in wave7)


def test_a_tampered_case_is_reported(tmp_path):
    import shutil

    case = case_dirs(CORPUS)[0]
    copy = tmp_path / case.name
    shutil.copytree(case, copy)
    truth = json.loads((copy / "truth.json").read_text())
    truth["root_lines"].append("a line nobody wrote")
    truth["split"] = "train"
    (copy / "truth.json").write_text(json.dumps(truth))
    problems = check_case(copy)
    assert any("split 'train'" in p for p in problems)
    assert any("1 root_lines not verbatim" in p for p in problems)


def test_the_check_command(capsys):
    assert main(["bench", "realrun", "check", str(CORPUS)]) == 0
    assert "well formed" in capsys.readouterr().out


def test_bench_eval_scores_real_run_cases(tmp_path):
    import shutil

    # wave-1 cases only: the engine is not run on the held-out wave 3 before its evaluation
    for case in [c for c in case_dirs(CORPUS) if int(c.name.rsplit("-", 1)[1]) <= 2][:2]:
        shutil.copytree(case, tmp_path / case.name)
    res = evaluate(tmp_path)
    assert res.overall["L4"].cases == 2
