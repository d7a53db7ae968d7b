from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import pytest
import yaml

from bot.cli_kb import register
from engine.model import Diagnosis, ParsedJob, TemplateStat
from kb import db as kbdb
from kb import diagnoses


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]):  # noqa: ANN201
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv(kbdb.ENV_VAR, url)

    def _run(*argv: str) -> tuple[int, str, str]:
        parser = argparse.ArgumentParser(prog="l4")
        sub = parser.add_subparsers(dest="command", required=True)
        register(sub)
        args = parser.parse_args(list(argv))
        code = args.func(args)
        out, err = capsys.readouterr()
        return code, out, err

    _run.url = url  # type: ignore[attr-defined]
    return _run


def test_db_upgrade_and_list_show(run) -> None:  # noqa: ANN001
    code, out, _ = run("db", "upgrade")
    assert code == 0 and kbdb.head_revision() in out
    code, out, err = run("patterns", "list")
    assert code == 0 and "xid-79-fallen-off-bus" in out and "pattern(s)" in err
    code, out, _ = run("patterns", "list", "--category", "hardware/storage")
    assert "disk-full" in out and "xid-79" not in out
    code, out, _ = run("patterns", "show", "nccl-watchdog-timeout")
    shown = yaml.safe_load(out)
    assert code == 0 and shown["kind"] == "cascade" and shown["feedback"] == {"confirmed": 0, "rejected": 0}


def test_bad_input_is_one_line_and_status_2(run, tmp_path: Path) -> None:  # noqa: ANN001
    code, out, err = run("patterns", "show", "no-such-id")
    assert code == 2 and err.count("\n") == 1 and "no pattern" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\n  : [\n")
    code, _, err = run("patterns", "add", "--file", str(bad))
    assert code == 2 and err.count("\n") == 1
    code, _, err = run("patterns", "add", "--file", str(tmp_path / "missing.yaml"))
    assert code == 2 and "cannot read" in err
    broad = tmp_path / "broad.yaml"
    broad.write_text(yaml.safe_dump({"id": "too-broad", "title": "t", "category": "platform",
                                     "signature": ["loss"]}))
    code, _, err = run("patterns", "add", "--file", str(broad))
    assert code == 2 and "too broad" in err and err.count("\n") == 1
    code, _, err = run("learn", str(tmp_path / "nope"))
    assert code == 2 and "not a job folder" in err
    code, _, err = run("patterns", "disable", "nope")
    assert code == 2


def test_add_disable_export_import(run, tmp_path: Path) -> None:  # noqa: ANN001
    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({"patterns": [{
        "id": "my-store-lease", "title": "Store lease lost", "category": "platform", "kind": "root",
        "severity": "high", "remediation": "restart proxy",
        "signature": ["MyStore client lost lease on shard \\d+"]}]}))
    code, out, _ = run("patterns", "add", "--file", str(f), "--user", "alice")
    assert code == 0 and "added my-store-lease" in out
    code, _, err = run("patterns", "add", "--file", str(f))
    assert code == 2 and "already exists" in err
    assert run("patterns", "disable", "my-store-lease")[0] == 0
    code, out, _ = run("patterns", "list")
    assert "my-store-lease" not in out
    code, out, _ = run("patterns", "list", "--all")
    assert "my-store-lease" in out and "disabled" in out
    exported = tmp_path / "export.yaml"
    assert run("patterns", "export", "--out", str(exported))[0] == 0
    doc = yaml.safe_load(exported.read_text())
    assert doc["version"] == 1 and any(p["id"] == "my-store-lease" for p in doc["patterns"])
    code, out, _ = run("patterns", "import", str(exported))
    assert code == 0 and "0 added" in out and "0 updated" in out
    for p in doc["patterns"]:
        if p["id"] == "my-store-lease":
            p["remediation"] = "restart the proxy, then the job"
    exported.write_text(yaml.safe_dump(doc))
    code, out, _ = run("patterns", "import", str(exported))
    assert code == 0 and "1 updated" in out
    code, out, _ = run("patterns", "show", "my-store-lease")
    shown = yaml.safe_load(out)
    assert shown["version"] == 2 and shown["remediation"].startswith("restart the proxy")
    code, out, _ = run("patterns", "export")
    assert code == 0 and "my-store-lease" in out


def test_confirm_from_cli(run) -> None:  # noqa: ANN001
    eng = kbdb.open_db(run.url)
    with kbdb.session(eng) as s:
        did = diagnoses.store(s, Diagnosis(job_id="j1"), {"model": "m"})
        s.commit()
    eng.dispose()
    code, out, _ = run("patterns", "confirm", str(did), "--event", "MyStore client lost lease on shard <*>",
                       "--title", "Store lease", "--category", "platform", "--remediation", "restart",
                       "--user", "bob")
    assert code == 0 and "store-lease" in out
    code, _, err = run("patterns", "confirm", "999", "--event", "MyStore client lost lease on shard <*>",
                       "--title", "x", "--category", "platform", "--remediation", "r", "--user", "bob")
    assert code == 2 and "no diagnosis" in err


def test_learn_uses_engine_parser(run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:  # noqa: ANN001
    job = tmp_path / "job-ok"
    job.mkdir()
    calls = []

    def parse_job(path: Path, *, executor=None) -> ParsedJob:  # noqa: ANN001
        calls.append(path)
        status = "failed" if path.name.startswith("bad") else "succeeded"
        return ParsedJob(job_id=path.name, settings={"model": "m"}, status=status,
                         templates=[TemplateStat(template="iteration <*> loss <*>", count=10)])

    fake = types.ModuleType("engine.parse")
    fake.parse_job = parse_job  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "engine.parse", fake)
    code, out, _ = run("learn", str(job))
    assert code == 0 and "learned 1 templates of job job-ok" in out
    code, out, _ = run("learn", str(job))
    assert code == 0 and "already learned" in out
    bad = tmp_path / "bad-job"
    bad.mkdir()
    code, _, err = run("learn", str(bad))
    assert code == 2 and "failed" in err
    assert calls == [job, job, bad]
