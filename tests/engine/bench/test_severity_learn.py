"""Learning the root severity from labelled cases (`l4 bench root-model severity-cv`)."""
import json
from pathlib import Path

from bot.cli import main
from engine.bench.severity_learn import cross_validate, load_cases, ship_rule
from tests.helpers.jobs import write_failed_job


def _case(root: Path, name: str, source: str, quiet: str) -> None:
    lines = ["[2024-05-01 10:00:00,000] [INFO] start", "loader: reading shard 3 of 8",
             "model: building layer 4",
             f"{quiet} 0x55{len(name)}",
             "[2024-05-01 10:00:01,000] [INFO] step 1 done", "[2024-05-01 10:00:02,000] [INFO] shutting down"]
    write_failed_job(root / name / "failed", {"node0/rank0.log": lines})
    (root / name / "truth.json").write_text(json.dumps(
        {"kind": "x", "stage": "training", "source": source, "split": "dev", "faulty_nodes": [],
         "indicating": [{"key": "k", "lines": [lines[3]]}], "root_lines": [lines[3]]}))


def _cases(tmp_path: Path) -> Path:
    cases = tmp_path / "cases"
    for i in range(3):
        _case(cases, f"pub{i}", f"github/o/p{i}#1", "allocator: attempt to free invalid pointer")
        _case(cases, f"run{i}", f"realrun/r{i}", "worker: unexpected invalid pointer given back")
    return cases


def test_a_severity_learned_on_other_groups_lifts_the_quiet_root_of_the_left_out_one(tmp_path):
    cases = load_cases([_cases(tmp_path)])
    assert len(cases) == 6 and {c.group for c in cases} == {"public wave 1", "realrun wave 1"}
    res = cross_validate(cases, {"C": [1.0], "threshold": [0.5], "lift": [0.6]}, "wave")
    assert all(o.rank is None for o in res.base)  # 0.1 under the lexicon: below the floor
    assert all(o.rank == 1 for o in res.tried[res.best])
    ok, why = ship_rule(res)
    assert ok, why


def test_severity_cv_command(tmp_path, capsys):
    cases = _cases(tmp_path)
    assert main(["bench", "root-model", "severity-cv", str(cases), "--group", "corpus"]) == 0
    text = capsys.readouterr().out
    assert "leave-one-corpus-out" in text and "| *public, pooled* | 3 |" in text
    assert main(["bench", "root-model", "severity-cv", str(tmp_path / "none")]) == 2
