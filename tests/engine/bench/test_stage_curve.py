"""The stage model's learning curve (`l4 bench stage-model curve`): held-out public waves scored by
models fitted on more and more of the other waves."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.bench.stage_curve import format_curve, learning_curve
from engine.bench.stage_learn import Record, save_records
from engine.stage_model import Evidence

REPO = Path(__file__).resolve().parents[3]
WORDS = {"init": "RuntimeError: Address already in use while binding the store port",
         "checkpointing": "OSError: No space left on device writing the checkpoint shard",
         "data_loading": "ValueError: corrupt sample in the dataset shard"}


def _record(wave: int, i: int, stage: str, corpus: str = "github") -> Record:
    ev = Evidence(failure=WORDS[stage], after=[], before=[], n_before=0, frames=[],
                  timeline={"progress": None, "log": None, "job": None})
    source = f"realrun/s{i}" if corpus == "realrun" else f"github/o/r{wave}{i}#1"
    return Record(case=f"{corpus}-{wave}-{i}-{stage}", source=source, stage=stage, rule="unknown",
                  evidence=ev, wave=wave, split="dev")


def _corpus() -> list[Record]:
    recs = [_record(w, i, s) for w in (1, 2, 3, 4) for i, s in enumerate(WORDS)]
    return recs + [_record(1, 9, "init", "realrun")]


def test_the_curve_scores_every_wave_held_out_at_each_size():
    points = learning_curve(_corpus(), sizes=[1, 3], draws=2)
    assert [p.waves for p in points] == [1, 3]
    # four waves of three cases, held out in turn: two draws at one wave, one draw with all three others
    assert [p.scored for p in points] == [4 * 3 * 2, 4 * 3]
    assert points[0].train_public == 3 and points[1].train_public == 9
    assert points[1].accuracy == 1.0  # the words of each stage are the same in every wave
    table = format_curve(points)
    assert "| 3 | 9 | 12 | 1.000 |" in table


def test_a_curve_needs_two_waves():
    with pytest.raises(ValueError, match="two waves"):
        learning_curve([_record(1, i, s) for i, s in enumerate(WORDS)])


def test_the_curve_command_reads_a_records_file(tmp_path):
    path = tmp_path / "records.json"
    save_records(_corpus(), path)
    run = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "stage-model", "curve", str(path),
                          "--draws", "1"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "held-out public wave accuracy" in run.stdout and "| 3 | 9 | 12 |" in run.stdout
    bad = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "stage-model", "curve",
                          str(tmp_path / "nope.json")], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert bad.returncode == 2 and "no such file or folder" in bad.stderr
    assert json.loads(path.read_text())
