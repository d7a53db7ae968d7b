"""The committed real-run corpus (tests/fixtures/realrun, made by `l4 bench realrun generate`) is well
formed: root lines verbatim in the rank files, a split, a known kind, history to compare with."""

import json
from pathlib import Path

from bot.cli import main
from engine.bench.evaluate import case_dirs, evaluate
from engine.bench.realrun.check import check_case, check_corpus

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realrun"


def test_every_committed_case_is_well_formed():
    assert check_corpus(CORPUS) == []
    index = json.loads((CORPUS / "cases.json").read_text())
    assert {r["case_id"] for r in index} == {c.name for c in case_dirs(CORPUS)}


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

    for case in case_dirs(CORPUS)[:2]:
        shutil.copytree(case, tmp_path / case.name)
    res = evaluate(tmp_path)
    assert res.overall["L4"].cases == 2
