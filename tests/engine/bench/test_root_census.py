"""The census of root-cause misses (`l4 bench root-model census`, engine/bench/root_census.py)."""
import json
from pathlib import Path

from bot.cli import main
from tests.helpers.jobs import write_failed_job


def _case(root: Path, name: str, lines: list[str], root_line: str) -> None:
    write_failed_job(root / name / "failed", {"node0/rank0.log": lines})
    (root / name / "truth.json").write_text(json.dumps(
        {"kind": "x", "stage": "training", "source": f"github/o/{name}#1", "split": "dev",
         "faulty_nodes": [], "indicating": [], "root_lines": [root_line]}))


def test_census_names_each_miss_and_counts_them(tmp_path, capsys):
    cases = tmp_path / "cases"
    disk = ["[2024-05-01 10:00:00,000] [INFO] start",
            "[2024-05-01 10:00:02,000] [ERROR] OSError: No space left on device"]
    _case(cases, "first", disk, disk[-1])
    quiet = ["[2024-05-01 10:00:00,000] [INFO] start", "src/alloc.cc:333] bad pointer 0x5581 given back",
             "[2024-05-01 10:00:02,000] [ERROR] RuntimeError: worker died"]
    _case(cases, "quiet", quiet, quiet[1])
    _case(cases, "gone", disk, "this line is in no log")
    out = tmp_path / "census.json"
    assert main(["bench", "root-model", "census", str(cases), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| root first | 1 (0.33) |" in text
    assert "| below floor, low severity | 1 / 1 |" in text and "| no template | 1 / 1 |" in text
    rows = {r["case"]: r for r in json.loads(out.read_text())}
    assert rows["first"]["rank"] == 1 and rows["first"]["miss"] is None
    assert rows["quiet"]["miss"]["first_template"].startswith("RuntimeError")
    assert main(["bench", "root-model", "census", str(tmp_path / "none")]) == 2
