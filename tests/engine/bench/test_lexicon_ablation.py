"""Switching severity-lexicon entries off (`l4 bench root-model ablate`, engine/bench/lexicon_ablation.py)."""
import json
from pathlib import Path

from bot.cli import main
from engine.bench.lexicon_ablation import NEVER, Moved, entries, switched_off
from engine.rules import load
from tests.helpers.jobs import write_failed_job


def test_every_entry_is_named_and_switched_off_in_a_copy():
    data = load("severity")
    names = dict(entries(data))
    assert "terms[0]" in names and "damp[0]" in names and "cascade[0]" in names
    assert "roles.report[0]" in names and "roles.traceback_intro[0]" in names
    off = switched_off(data, names["terms[2]"])
    assert off["terms"][2]["regex"] == NEVER and data["terms"][2]["regex"] != NEVER
    off = switched_off(data, names["roles.wrapper[0]"])
    assert off["roles"]["wrapper"][0] == NEVER and data["roles"]["wrapper"][0] != NEVER


def test_moved_counts_gains_and_losses_per_group():
    m = Moved("terms[0]", {"a": ("public wave 2", 2, 1), "b": ("public wave 2", 1, None), "c": ("x", 4, 3)})
    assert m.per_group() == {"public wave 2": (0, -1), "x": (0, 1)}


def _case(root: Path, name: str, lines: list[str], root_line: str) -> None:
    write_failed_job(root / name / "failed", {"node0/rank0.log": lines})
    (root / name / "truth.json").write_text(json.dumps(
        {"kind": "x", "stage": "training", "source": f"github/o/{name}#1", "split": "dev",
         "faulty_nodes": [], "indicating": [], "root_lines": [root_line]}))


def test_ablate_reports_the_entry_a_root_needs_and_restores_the_lexicon(tmp_path, capsys):
    cases = tmp_path / "cases"
    disk = ["[2024-05-01 10:00:00,000] [INFO] start",
            "[2024-05-01 10:00:01,000] [WARNING] watchdog heartbeat missed on step 7",
            "[2024-05-01 10:00:02,000] [WARNING] No space left on device"]
    _case(cases, "disk", disk, disk[-1])
    before = json.dumps(load("severity"), sort_keys=True)
    out = tmp_path / "moved.json"
    assert main(["bench", "root-model", "ablate", str(cases), "--only", "terms[2],terms[0]",
                 "--no-library", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| terms[0] | 0 | – |" in text
    assert "| terms[2] | 1 | public wave 1 -1/-1 |" in text
    assert json.loads(out.read_text())["terms[2]"]["disk"][1] == 1
    assert json.dumps(load("severity"), sort_keys=True) == before
