"""`l4 bench eval` on corpora of real cases: root cause first/top-3, splits, grep and Error_time.

The fixture tests/engine/bench/fixtures/real_mini holds three hand-made cases: a two-node
illegal-memory-access (dev; the root on node1 is later in folder order, earlier in time than the
watchdog cascade on node0), a Lightning OOM (test) and the same OOM without a split (all only).
"""
from pathlib import Path

import pytest

from bot.cli import main
from engine.bench.baselines import grep_events
from engine.bench.evaluate import case_dirs, evaluate, format_report, history_dirs, source_group, summary
from engine.bench.misses import format_misses, misses
from engine.bench.real_report import basis_row, format_real_report, format_real_splits
from engine.bench.rootcause import root_rank, shows_root, template_fits

MINI = Path(__file__).parent / "fixtures" / "real_mini"
ROOT = ("2024-05-01 10:00:06,000 ERROR [rank1] RuntimeError: CUDA error: an illegal memory access was "
        "encountered")


def test_template_fits_a_root_line_of_another_rank():
    line = "[rank5]: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error, rank 5"
    assert template_fits("RuntimeError: NCCL error in: <*> unhandled cuda error, rank <*>", line)
    assert not template_fits("RuntimeError: NCCL error in: <*> unhandled system error, rank <*>", line)
    # a template without a constant word of three letters shows nothing
    assert not template_fits("<*>", line) and not template_fits("<*>: <*>", line)


def test_root_rank_by_example_or_template():
    events = [("Watchdog caught <*>", ["w"]), ("other", [ROOT]), ("RuntimeError: CUDA error: <*>", ["x"])]
    assert root_rank(events, [ROOT]) == 2
    assert root_rank(events[2:], ["[rank5]: RuntimeError: CUDA error: an illegal memory access"]) == 1
    assert root_rank(events[:1], [ROOT]) is None
    assert shows_root("unrelated words", [ROOT], [ROOT])


def test_grep_orders_by_file_or_by_time():
    job = MINI / "nccl-illegal-access" / "failed"
    by_file = [ex[0] for _, ex in grep_events(job, "file")]
    by_time = [ex[0] for _, ex in grep_events(job, "time")]
    assert "Watchdog caught" in by_file[0] and by_file[1] == ROOT
    assert by_time[0] == ROOT and "Watchdog caught" in by_time[1]
    with pytest.raises(ValueError, match="grep order"):
        grep_events(job, "size")


def test_splits_select_cases_and_history_folders(tmp_path):
    assert [d.name for d in case_dirs(MINI, "dev")] == ["nccl-illegal-access"]
    assert [d.name for d in case_dirs(MINI, "test")] == ["lightning-oom"]
    assert len(case_dirs(MINI)) == 3
    with pytest.raises(ValueError, match="split"):
        case_dirs(MINI, "train")
    (tmp_path / "history" / "h1").mkdir(parents=True)
    (tmp_path / "history-2").mkdir()
    assert [p.name for p in history_dirs(tmp_path)] == ["h1", "history-2"]
    assert source_group({"source": "github/pytorch/pytorch#12345"}) == "github/pytorch/pytorch"


def test_real_corpus_scores_root_cause_for_l4_and_baselines():
    res = evaluate(MINI, split="dev")
    assert res.real and res.split == "dev"
    grep_file, grep_time = res.overall["grep-file"], res.overall["grep-time"]
    assert (grep_file.root_cases, grep_file.root_first, grep_file.root_top) == (1, 0, 1)
    assert (grep_time.root_first, grep_time.root_top) == (1, 1)
    assert grep_file.node_cases == 0 and res.overall["L4"].node_cases == 1  # grep ranks no nodes
    l4 = res.overall["L4"]
    assert l4.root_cases == 1 and l4.stage_cases == 1 and 0 <= l4.stage_abstained <= 1
    assert res.overall["error-time"].root_cases == 1 and res.overall["error-time"].stage_cases == 0
    assert set(res.per_source) == {"handmade/fixture"}
    report = format_real_report(res)
    for name in ("L4", "grep-file", "grep-time", "error-time"):
        assert f"| {name} | 1 |" in report
    assert "#### L4 per fault kind (dev)" in report and "| illegal_memory_access | 1 |" in report
    assert "#### L4 per source (dev)" in report and "| handmade/fixture | 1 |" in report
    # how often the stage is right by what it rests on: the one case's row, and its basis in the case list
    assert "Stage by what it rests on (dev):" in report
    row = basis_row(res.cases[0])
    assert res.cases[0]["stage_basis"] in ("timeline", "frame", "lexicon", "words", "rules")
    right = int(res.cases[0]["stage"] == res.cases[0]["truth_stage"])
    assert f"| {row} | 1 | 1.00 | {right:.2f} ({right}) |" in report
    s = summary(res)
    assert s["split"] == "dev" and s["root_cases"] == 1 and s["baselines"]["grep-time"]["root_first"] == 1.0


def test_basis_rows_band_the_models_probability():
    assert basis_row({"stage_basis": "timeline", "stage_probability": None}) == "timeline"
    assert basis_row({"stage_basis": "words", "stage_probability": 0.6}) == "words, p ≥ 0.6"
    assert basis_row({"stage_basis": "words", "stage_probability": 0.45}) == "words, p 0.4–0.6"
    assert basis_row({"stage_basis": "words", "stage_probability": 0.12}) == "words, p < 0.4"
    assert basis_row({"stage_basis": None}) == "none (no event)"


def test_all_split_tallies_per_source():
    res = evaluate(MINI)
    assert res.overall["L4"].cases == 3
    per_source = {k: m["L4"].cases for k, m in res.per_source.items()}
    assert per_source == {"handmade/fixture": 2, "handmade/other": 1}
    both = format_real_splits({"test": evaluate(MINI, split="test"), "dev": evaluate(MINI, split="dev")})
    assert both.index("| test | L4 |") < both.index("| dev | L4 |")


def test_generated_cases_keep_their_report(tmp_path):
    from engine.bench.generate import generate_suite

    generate_suite(tmp_path, 1, seed=5, kinds=["oom"])
    res = evaluate(tmp_path)
    assert not res.real and "grep-file" not in res.overall
    assert "root first" not in format_report(res) and "root_first" not in summary(res)


def test_cli_eval_split(capsys, tmp_path):
    out = tmp_path / "f.json"
    assert main(["bench", "eval", str(MINI), "--split", "test", "--json", str(out)]) == 0
    assert "#### L4 and the baselines (test)" in capsys.readouterr().out
    assert '"split": "test"' in out.read_text()
    assert main(["bench", "eval", str(MINI), "--split", "test,dev"]) == 0
    assert "#### L4 and the baselines by split" in capsys.readouterr().out
    assert main(["bench", "eval", str(MINI), "--split", "train"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--split" in err


def test_misses_list_the_cases_l4_got_wrong(capsys):
    res = evaluate(MINI, split="all")
    assert {c["case"] for c in res.cases} == {d.name for d in case_dirs(MINI)}
    wrong = misses(res)
    assert all(c["stage"] != c["truth_stage"] or c["root_rank"] != 1 for c in wrong)
    text = format_misses(res)
    assert text.startswith(f"#### L4's misses (all): {len(wrong)} of {len(res.cases)} cases")
    assert main(["bench", "eval", str(MINI), "--split", "test,dev", "--show-misses"]) == 0
    out = capsys.readouterr().out
    assert "#### L4's misses (test)" in out and "#### L4's misses (dev)" in out
