"""Blind relabelling of the stage (`l4 bench stage-model agreement`): annotators against the labels, each
other and the engine, on the answers file committed under tests/fixtures/stage_relabel/."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bench.stage_agreement import Answer, agreement, cohen_kappa, format_agreement, load_answers

ROOT = Path(__file__).resolve().parents[3]
RELABEL = ROOT / "tests" / "fixtures" / "stage_relabel" / "answers.jsonl"
THREAD_S23 = ROOT / "tests" / "fixtures" / "stage_relabel" / "thread_answers_s23.jsonl"
LOGS_S23 = ROOT / "tests" / "fixtures" / "stage_relabel" / "logs_answers_s23.jsonl"
CORPUS = ROOT / "tests" / "fixtures" / "public_logs"


def _corpus(tmp_path: Path, labels: dict[str, tuple[str, str]]) -> Path:
    for name, (stage, split) in labels.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "truth.json").write_text(json.dumps({"stage": stage, "split": split}))
    return tmp_path


def test_kappa_is_one_for_the_same_answers_and_zero_at_chance():
    assert cohen_kappa(["a", "b", "a", "b"], ["a", "b", "a", "b"]) == 1.0
    assert cohen_kappa(["a", "a", "b", "b"], ["a", "b", "a", "b"]) == 0.0
    assert cohen_kappa([], []) is None
    assert cohen_kappa(["a"], ["a"]) is None  # one stage only: no chance to beat


def test_annotators_are_scored_on_their_cases_pairs_on_shared_ones_the_engine_on_all(tmp_path):
    corpus = _corpus(tmp_path, {"c1": ("training", "dev"), "c2": ("init", "test"),
                                "c3": ("teardown", "test")})
    answers = [Answer("c1", "A", "training", True), Answer("c2", "A", "init", False),
               Answer("c3", "A", "training", True),
               Answer("c1", "B", "training", True), Answer("c2", "B", "model_loading", True)]
    engine = {"c1": "training", "c2": "init", "c3": "init"}
    res = agreement(corpus, answers, lambda case: engine[case.name])
    assert res.cases == 3
    a, b, e = res.rows
    assert (a.name, a.right, a.cases, a.by_subset["engine wrong"]) == ("annotator A", 2, 3, [0, 1])
    assert (b.right, b.cases, b.by_subset["sure"], b.by_subset["test"]) == (1, 2, [1, 2], [0, 1])
    assert b.by_subset["engine right"] == [1, 2] and "engine wrong" not in b.by_subset
    # readable: every annotator of the case gave the label (c1 only); sure: every annotator was (c1, c3)
    assert (e.name, e.right, e.by_subset["readable"], e.by_subset["sure"]) == ("engine", 2, [1, 1], [1, 2])
    assert res.pair_agree["A – B"] == (1, 2)
    text = format_agreement(res)
    assert "| annotator A | 3 | 0.67 (2/3) |" in text and "| engine | 3 |" in text


def test_a_reading_file_of_one_reader_loads_as_its_answers(tmp_path):
    f = tmp_path / "reading.json"
    reading = {"c1": {"stage": "init", "reader": "init", "sure": True}}
    f.write_text(json.dumps({"about": "x", "readings": reading}))
    assert load_answers(f) == [Answer("c1", "reading", "init", True)]
    f.write_text(json.dumps({"readings": {"c1": {"stage": "init", "reader": "later", "sure": True}}}))
    with pytest.raises(ValueError, match="c1: unknown stage 'later'"):
        load_answers(f)


def test_a_bad_answers_file_says_which_line(tmp_path):
    f = tmp_path / "answers.jsonl"
    f.write_text('{"case": "c1", "annotator": "A", "stage": "training", "sure": true}\n{"case": "c2"}\n')
    with pytest.raises(ValueError, match=r"answers.jsonl:2: not an answer line"):
        load_answers(f)
    f.write_text('{"case": "c1", "annotator": "A", "stage": "lunch", "sure": true}\n')
    with pytest.raises(ValueError, match="unknown stage 'lunch'"):
        load_answers(f)


def test_the_committed_answers_name_corpus_cases_two_samples_of_two_annotators():
    """A and B read the same 72 random cases; C and D 45 test cases each, none shared."""
    answers = load_answers(RELABEL)
    by: dict[str, set[str]] = {}
    for a in answers:
        by.setdefault(a.annotator, set()).add(a.case)
    assert sorted(by) == ["A", "B", "C", "D"]
    assert by["A"] == by["B"] and len(by["A"]) == 72
    assert len(by["C"]) == len(by["D"]) == 45 and not by["C"] & by["D"] and not by["C"] & by["A"]
    assert all((CORPUS / c / "truth.json").is_file() for c in set().union(*by.values()))
    splits = {json.loads((CORPUS / c / "truth.json").read_text())["split"] for c in by["C"] | by["D"]}
    assert splits == {"test"}


def test_session_23s_readers_read_the_same_40_test_cases_with_and_without_the_thread():
    """E and F had the thread, G and H the logs alone; all four answered the same 40 test cases."""
    by: dict[str, set[str]] = {}
    for path, names in ((THREAD_S23, {"E", "F"}), (LOGS_S23, {"G", "H"})):
        answers = load_answers(path)
        assert {a.annotator for a in answers} == names
        for a in answers:
            by.setdefault(a.annotator, set()).add(a.case)
    assert by["E"] == by["F"] == by["G"] == by["H"] and len(by["E"]) == 40
    splits = {json.loads((CORPUS / c / "truth.json").read_text())["split"] for c in by["E"]}
    assert splits == {"test"}
    with_thread = [json.loads(line) for line in THREAD_S23.read_text().splitlines() if line.strip()]
    assert all(isinstance(d["thread_found"], bool) for d in with_thread)


def test_the_command_prints_the_table_and_errs_in_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "stage-model", "agreement", str(RELABEL),
                          "--corpus", str(CORPUS), "--no-engine"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "| annotator A |" in run.stdout and "Cohen's kappa" in run.stdout
    bad = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "stage-model", "agreement",
                          str(tmp_path / "none.jsonl")], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode != 0 and bad.stderr.strip().count("\n") == 0
    assert "no such answers file" in bad.stderr
