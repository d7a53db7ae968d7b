from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import pytest
import yaml

from bot.cli_kb import register
from engine.model import Diagnosis, Event, ParsedJob, TemplateStat
from kb import db as kbdb
from kb import diagnoses
from tests.helpers.wait import WAIT


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


LEASE = "MyStore client lost lease on shard <*>"


def _stored(url: str, *templates: str) -> int:
    eng = kbdb.open_db(url)
    events = [Event(template=t, score=0.9, count=1, level="ERROR", nodes=["n1"], first_seen=None,
                    examples=[t.replace("<*>", "7")]) for t in templates]
    with kbdb.session(eng) as s:
        did = diagnoses.store(s, Diagnosis(job_id="j1", events=events), {"model": "m"})
        s.commit()
    eng.dispose()
    return did


def test_confirm_from_cli(run) -> None:  # noqa: ANN001
    did = _stored(run.url, "GPU <*> reported a fan speed of <*> rpm", LEASE)
    code, out, _ = run("patterns", "confirm", str(did), "--event", LEASE,
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


def test_confirm_takes_only_events_of_the_diagnosis(run) -> None:  # noqa: ANN001
    did = _stored(run.url, "GPU <*> reported a fan speed of <*> rpm", LEASE)
    args = ("--title", "Fan", "--category", "hardware/node", "--remediation", "r", "--user", "bob")
    code, _, err = run("patterns", "confirm", str(did), "--event", "Not in the diagnosis <*>", *args)
    assert code == 2 and err.count("\n") == 1 and "is not an event of diagnosis" in err
    code, out, _ = run("patterns", "confirm", str(did), "--event", "1", *args)  # its number in `show`
    assert code == 0 and "created pattern fan" in out
    code, out, _ = run("patterns", "show", "fan")
    assert "fan speed" in out


def _export_one(run, tmp_path: Path, pid: str, **changes) -> Path:  # noqa: ANN001
    code, out, _ = run("patterns", "export")
    doc = yaml.safe_load(out)
    (p,) = [x for x in doc["patterns"] if x["id"] == pid]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "patterns": [p | changes]}))
    return path


def test_import_never_overwrites_a_builtin_silently(run, tmp_path: Path) -> None:  # noqa: ANN001
    path = _export_one(run, tmp_path, "xid-79-fallen-off-bus", remediation="ignore it")
    code, out, err = run("patterns", "import", str(path))
    assert code == 0 and "1 copied" in out
    assert "xid-79-fallen-off-bus is built-in; your version was added as xid-79-fallen-off-bus-sre" in err
    code, out, _ = run("patterns", "show", "xid-79-fallen-off-bus")
    builtin = yaml.safe_load(out)
    assert builtin["source"] == "builtin" and builtin["remediation"] != "ignore it"
    code, out, _ = run("patterns", "show", "xid-79-fallen-off-bus-sre")
    assert yaml.safe_load(out)["remediation"] == "ignore it"
    code, out, err = run("patterns", "import", str(path), "--force")
    assert code == 0 and "1 replaced builtin" in out
    assert "warning: built-in pattern xid-79-fallen-off-bus replaced" in err
    code, out, _ = run("patterns", "show", "xid-79-fallen-off-bus")
    assert yaml.safe_load(out)["remediation"] == "ignore it"


def test_import_of_an_unchanged_export_changes_nothing(run, tmp_path: Path) -> None:  # noqa: ANN001
    code, out, _ = run("patterns", "export")
    path = tmp_path / "all.yaml"
    path.write_text(out)
    code, out, err = run("patterns", "import", str(path))
    assert code == 0 and out.startswith("0 added, 0 updated,") and err == ""


@pytest.mark.parametrize("sig, why", [
    ("(a+)+$", "nests one repetition"),
    ("(\\d+)+ ECC", "nests one repetition"),
    ("a+", "too unspecific"),
    ("device: cuda", "it matches the normal line 'Using device: cuda'"),  # the example is shown
    ("world size \\d+", "normal line"),
])
def test_add_refuses_broad_and_catastrophic_regexes(run, tmp_path: Path, sig: str, why: str) -> None:  # noqa: ANN001
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"id": "my-pattern", "title": "t", "category": "platform",
                                    "signature": [sig]}))
    code, _, err = run("patterns", "add", "--file", str(path))
    assert code == 2 and err.count("\n") == 1 and why in err, err


def test_a_bad_regex_is_one_line_without_re2_log_noise(tmp_path: Path) -> None:
    import subprocess

    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump({"id": "my-pattern", "title": "t", "category": "platform",
                                    "signature": ["(unclosed"]}))
    r = subprocess.run([sys.executable, "-m", "bot.cli", "patterns", "add", "--file", str(path)],
                       capture_output=True, text=True, timeout=WAIT,
                       env={**__import__("os").environ, "L4_DATABASE_URL": f"sqlite:///{tmp_path / 'k.db'}"})
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "does not compile under RE2" in r.stderr and "missing )" in r.stderr and "re2.cc" not in r.stderr


def test_a_binary_yaml_file_is_bad_input(run, tmp_path: Path) -> None:  # noqa: ANN001
    path = tmp_path / "blob.yaml"
    path.write_bytes(bytes(range(256)) * 4)
    code, _, err = run("patterns", "import", str(path))
    assert code == 2 and err.count("\n") == 1 and "blob.yaml is not a YAML text file" in err


def test_writes_to_an_in_memory_database_are_refused(run, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setenv(kbdb.ENV_VAR, "sqlite:///")
    code, _, err = run("patterns", "disable", "disk-full")
    assert code == 2 and "in-memory database: nothing would be kept" in err
    code, out, _ = run("patterns", "list")  # reading the built-in library is fine
    assert code == 0 and "disk-full" in out
