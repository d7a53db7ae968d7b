"""The stage the rules alone give a job (engine.stage.rule_stage), beside the learned combination that
`diagnose` reports: for tests of the rules themselves."""

from __future__ import annotations

from pathlib import Path

from engine.bench.stage_learn import stage_inputs
from engine.diagnose import analyze
from engine.parse import parse_jobs
from engine.stage import rule_stage


def rules_stage(job: Path) -> str:
    parsed = parse_jobs([job])[0]
    diagnosis = analyze(parsed)
    ids, trusted = stage_inputs(parsed, diagnosis)
    return rule_stage(parsed, ids, trust_time=trusted)
