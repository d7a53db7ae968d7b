"""The library as ranking evidence: `l4 diagnose` by default, `l4 bench eval --no-library`."""
import json
from pathlib import Path

import jsonschema

from bot.cli import main
from engine.bench.generate import generate_suite
from tests.bot.test_cli import run_l4
from tests.helpers.jobs import make_job

NFS = "nfs: server 10.40.0.12 not responding, still trying"
SCHEMA = Path(__file__).resolve().parents[2] / "engine" / "data" / "diagnosis.v1.schema.json"


def test_diagnose_ranks_a_library_root_first_and_names_it(tmp_path):
    make_job(tmp_path / "a", nodes=3, fault_node=1, fault_lines=(NFS,))
    r = run_l4("diagnose", str(tmp_path / "a"), "--format", "json", db=tmp_path / "kb.db")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    jsonschema.validate(d, json.loads(SCHEMA.read_text()))
    assert d["events"][0]["template"].startswith("nfs: server")
    assert d["events"][0]["known"] == "network-fs-not-responding"
    r = run_l4("diagnose", str(tmp_path / "a"), "--format", "json", "--no-match", db=tmp_path / "kb.db")
    first = json.loads(r.stdout)["events"][0]
    assert "known" not in first and not first["template"].startswith("nfs: server")


def test_bench_eval_with_and_without_the_library(tmp_path, capsys):
    generate_suite(tmp_path / "cases", 1, seed=4, kinds=["xid79"])
    for extra in ([], ["--no-library"]):
        out = tmp_path / f"figures{len(extra)}.json"
        assert main(["bench", "eval", str(tmp_path / "cases"), "--json", str(out), *extra]) == 0
        assert json.loads(out.read_text())["cases"] == 1
    assert "| L4 |" in capsys.readouterr().out
