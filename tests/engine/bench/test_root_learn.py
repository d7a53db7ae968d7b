"""Learning the root-cause order (`l4 bench root-model extract|cv|train`, engine/bench/root_learn.py)."""
import json
import subprocess
import sys
from pathlib import Path

from bot.cli import main
from engine.bench.root_learn import (
    Candidate,
    Config,
    Record,
    cross_validate,
    fit,
    format_cv,
    held_out,
    load_records,
    model_order,
    root_lines,
    save_records,
    settings,
    ship_rule,
    shown_rank,
)
from tests.helpers.jobs import write_failed_job

REPO = Path(__file__).resolve().parents[3]
MINI = REPO / "tests/engine/bench/fixtures/real_mini"


def test_held_out_halves_are_the_stage_models_and_the_outsiders_test_half():
    rules = settings()["held_out"]
    import yaml

    stage_rules = yaml.safe_load((REPO / "engine/bench/data/stage_learn.yaml").read_text())["held_out"]
    assert all(r in rules for r in stage_rules)
    assert held_out({"source": "othergen/nan_loss", "split": "test"}, rules)
    assert not held_out({"source": "othergen/nan_loss", "split": "dev"}, rules)
    # the later outsiders' own corpora
    for outsider in ("othergen2/xid79", "othergen3/ray_node_lost", "othergen4/gpu_xid_dbe"):
        assert held_out({"source": outsider, "split": "test"}, rules)
        assert not held_out({"source": outsider, "split": "dev"}, rules)
    assert held_out({"source": "realrun/ddp", "wave": 5, "split": "test"}, rules)
    # real-run wave 7 (session 9): its test half held out, its measured dev half trains
    assert held_out({"source": "realrun/tp", "wave": 7, "split": "test"}, rules)
    assert not held_out({"source": "realrun/tp", "wave": 7, "split": "dev"}, rules)  # measured: trains
    assert held_out({"source": "github/a/b#1", "wave": 4, "split": "test"}, rules)
    assert held_out({"source": "github/a/b#1", "split": "test"}, rules)  # public wave 1: its test half too
    assert not held_out({"source": "github/a/b#1", "split": "dev"}, rules)


def test_a_generated_case_is_labelled_by_the_indicating_lines_of_its_own_kind():
    truth = {"kind": "ecc", "indicating": [{"key": "nccl", "lines": ["a"]}, {"key": "ecc", "lines": ["b"]}]}
    assert root_lines(truth) == ["b"]
    assert root_lines({**truth, "root_lines": ["r"]}) == ["r"]


def _record(name: str, group: str, root_at: int, n: int = 4) -> Record:
    """n candidates in hand order; the root at `root_at`, the only one with feature x."""
    corpus, _, wave = group.partition(" wave ")
    cands = [Candidate(features={"x": float(i == root_at), "hand": 1.0 - i / 10, "hand_rank": i / n},
                       label=i == root_at, score=round(0.9 - 0.05 * i, 4), severity=0.9, role=None)
             for i in range(n)]
    return Record(case=name, corpus=corpus, source=f"{corpus}/{name}", wave=int(wave or 1), split="dev",
                  candidates=cands)


def _records() -> list[Record]:
    groups = ["public wave 1", "public wave 2", "realrun wave 1", "synthetic"]
    return [_record(f"{g}-{i}", g, root_at=1 + i % 2) for g in groups for i in range(4)]


def test_shown_rank_counts_the_events_select_events_keeps():
    r = _record("a", "public wave 1", root_at=2)
    assert shown_rank(r, []) == 3  # the hand order
    assert shown_rank(r, [2, 0, 1]) == 1
    low = Record("b", "public", "s", 1, "dev", [Candidate({}, False, 0.9, 0.9, None),
                                                 Candidate({}, True, 0.2, 0.9, None)])
    assert shown_rank(low, []) is None  # below the floor: never reported


def test_a_learned_order_that_wins_on_left_out_waves_ships():
    records = _records()
    model = fit(records, Config("pairwise", 1.0, 3, False))
    assert model.weights["x"] > 0 and "hand" not in model.weights  # the learned order reads no hand score
    assert model_order(records[0], model)[0] == 1
    res = cross_validate(records, {"kinds": ["pointwise", "pairwise"], "C": [1.0], "top_k": [3]}, "wave")
    ok, why = ship_rule(res, "learned")
    assert ok, why
    text = format_cv(res)
    assert "leave-one-wave-out" in text and "| public wave 2 | 4 |" in text and "*public, pooled*" in text


def test_an_order_that_loses_does_not_ship():
    records = [_record(f"p{i}", "public wave 1" if i % 2 else "public wave 2", root_at=0) for i in range(6)]
    for r in records[:3]:
        r.candidates[0].features["x"] = 0.0
        r.candidates[2].features["x"] = 1.0  # x points away from the root on half of the cases
    res = cross_validate(records, {"kinds": ["pointwise"], "C": [1.0], "top_k": [3]}, "wave")
    ok, why = ship_rule(res, "learned")
    assert not ok and "against the hand order" in why


def test_extract_and_cv_run_on_real_cases(tmp_path, capsys):
    cases = tmp_path / "cases"
    for i in range(2):  # two sources, and the fixtures' two cases not of a test half (one source)
        lines = ["2024-05-01 10:00:00,000 INFO start", f"2024-05-01 10:00:01,000 WARN slow step {i}",
                 "2024-05-01 10:00:02,000 ERROR OSError: [Errno 28] No space left on device"]
        write_failed_job(cases / f"disk-{i}" / "failed", {"node0/rank0.log": lines})
        (cases / f"disk-{i}" / "truth.json").write_text(json.dumps(
            {"kind": "disk_full", "stage": "checkpointing", "source": f"github/o/disk{i}#1", "split": "dev",
             "faulty_nodes": [], "indicating": [], "root_lines": [lines[-1]]}))
    out = tmp_path / "records.json"
    run = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "root-model", "extract", str(cases),
                          str(MINI), str(out)], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert run.returncode == 0, run.stderr
    records = load_records(out)
    assert len(records) == 4 and all(r.candidates for r in records)
    assert all(shown_rank(r, []) == 1 for r in records if r.case.startswith("disk"))
    save_records(records, tmp_path / "again.json")
    assert load_records(tmp_path / "again.json")[0].to_dict() == records[0].to_dict()
    assert main(["bench", "root-model", "cv", str(out), "--group", "source"]) == 0
    shown = capsys.readouterr().out
    assert "leave-one-source-out" in shown and "| **all** | 4 |" in shown
    assert main(["bench", "root-model", "cv", str(tmp_path / "nope")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
