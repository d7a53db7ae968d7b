"""The command line as an SRE meets it: nothing silent (damage, in-memory databases), bad settings
as one line and exit 2, the diagnosis ID in every format, `l4 diagnoses list|show`, `l4 demo --keep`."""

import json
import os
import re
from importlib import resources
from pathlib import Path

import jsonschema
import pytest
import zstandard

from bot.cli import build_parser, main
from tests.helpers.jobs import make_job

SCHEMA = json.loads(resources.files("engine").joinpath("data", "diagnosis.v1.schema.json").read_text())
XID = ("NVRM: Xid (PCI:0000:06:00): 79, pid=1234, name=python, GPU has fallen off the bus.",)


@pytest.fixture
def l4(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]):  # noqa: ANN201
    """`l4 ARGS` in this process, on a knowledge base file of its own: (exit, stdout, stderr)."""
    monkeypatch.setenv("L4_DATABASE_URL", f"sqlite:///{tmp_path / 'kb.db'}")
    monkeypatch.chdir(tmp_path)  # no .env of the developer's

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_json_and_html_carry_the_diagnosis_id_and_diagnoses_list_it(l4, tmp_path: Path) -> None:  # noqa: ANN001
    job = make_job(tmp_path / "job-7", nodes=3, fault_node=1, fault_lines=XID)
    code, out, err = l4("diagnose", str(job), "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    jsonschema.validate(d, SCHEMA)
    assert d["diagnosis_id"] == 1 and list(d)[:3] == ["schema", "job_id", "diagnosis_id"]
    code, out, _ = l4("diagnose", str(job), "--format", "html", "--no-match")
    assert code == 0 and "<code id='diagnosis-id'>2</code>" in out and "l4 patterns confirm 2" in out
    code, out, err = l4("diagnoses", "list")
    rows = out.splitlines()
    assert code == 0 and rows[0].split()[:2] == ["ID", "TIME"] and len(rows) == 3
    assert re.match(r"\s+2\s+\S+ \S+\s+job-7\s+analyzed\s+-\s+-$", rows[1]), rows[1]
    assert re.match(r"\s+1\s+\S+ \S+\s+job-7\s+matched\s+xid-79-fallen-off-bus\s+-$", rows[2]), rows[2]
    code, out, _ = l4("diagnoses", "list", "--job", "nope", "--limit", "1")
    assert code == 0 and out == ""
    code, out, _ = l4("patterns", "confirm", "1", "--event", "1", "--title", "Xid 79 on this rack",
                      "--category", "hardware/accelerator", "--remediation", "reseat", "--user", "alice")
    assert code == 0, out
    code, out, _ = l4("diagnoses", "show", "1")
    assert code == 0 and "diagnosis 1 of job job-7" in out and "matched pattern: xid-79-fallen-off-bus" in out
    assert "confirmed by: alice" in out and "top node: node-001" in out and "   1. [" in out
    # the stored stage keeps what it rests on (the job's iteration lines run up to the failure)
    assert "  stage: training (placed by the job's own progress and stage lines)\n" in out
    code, out, _ = l4("diagnoses", "list", "--format", "json")
    assert json.loads(out)[1]["confirmed_by"] == ["alice"]
    code, _, err = l4("diagnoses", "show", "99")
    assert code == 2 and err == "l4 diagnoses show: no diagnosis with id 99\n"


def test_an_in_memory_database_is_not_said_to_store_anything(l4, monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    monkeypatch.setenv("L4_DATABASE_URL", "sqlite:///")
    job = make_job(tmp_path / "j", nodes=3, fault_node=0)
    code, out, err = l4("diagnose", str(job), "--format", "json")
    assert code == 0 and "diagnosis_id" not in json.loads(out)
    assert "not stored: L4_DATABASE_URL is an in-memory database" in err and "stored as" not in err
    code, out, err = l4("diagnose", str(job))
    assert code == 0 and "stored as diagnosis" not in err and "not stored" in err


def test_bad_database_settings_are_one_line_and_exit_2(l4, monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    job = make_job(tmp_path / "j", nodes=2, fault_node=0)
    not_a_db = tmp_path / "notes.db"
    not_a_db.write_bytes(b"these are my notes, not a database\n" * 200)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    cases = {
        "nonsense://x": "cannot open the knowledge base L4_DATABASE_URL=nonsense://x",
        f"sqlite:///{not_a_db}": f"{not_a_db} is not a SQLite database",
        f"sqlite:///{a_file}/kb.db": f"cannot open the knowledge base L4_DATABASE_URL=sqlite:///{a_file}/kb.db",
        "postgresql+psycopg://l4:secret@127.0.0.1:1/kb": "L4_DATABASE_URL=postgresql+psycopg://l4:***@127.0.0.1:1/kb",
    }
    for url, want in cases.items():
        monkeypatch.setenv("L4_DATABASE_URL", url)
        for argv in (("diagnose", str(job)), ("patterns", "list"), ("diagnoses", "list")):
            code, out, err = l4(*argv)
            assert code == 2 and err.count("\n") == 1 and want in err, (url, argv, err)
            assert "internal error" not in err and "secret" not in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_database_in_a_read_only_folder_names_the_folder(l4, monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    monkeypatch.setenv("L4_DATABASE_URL", f"sqlite:///{ro / 'kb.db'}")
    try:
        code, _, err = l4("patterns", "list")
    finally:
        ro.chmod(0o755)
    assert code == 2 and err.count("\n") == 1 and str(ro) in err


def test_a_folder_of_empty_files_is_bad_input(l4, tmp_path: Path) -> None:  # noqa: ANN001
    job = tmp_path / "empty-job"
    for n in range(3):
        (job / f"node-{n}").mkdir(parents=True)
        (job / f"node-{n}" / "rank-0.log").write_bytes(b"")
    code, out, err = l4("diagnose", str(job))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"no log lines in {job}: its 3 file(s) are empty or unreadable" in err


def test_a_truncated_zstd_rank_is_listed_and_its_lines_analysed(l4, tmp_path: Path) -> None:  # noqa: ANN001
    job = make_job(tmp_path / "j", nodes=3, fault_node=1, fault_lines=XID)
    rank = job / "node-001" / "rank-0002.log"
    whole = zstandard.ZstdCompressor().compress(rank.read_bytes())
    (rank.parent / "rank-0002.log.zst").write_bytes(whole[:-12])
    rank.unlink()
    (job / "node-002" / "core.dump").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8)
    code, out, err = l4("diagnose", str(job), "--format", "json")
    assert code == 0, err
    st = json.loads(out)["stats"]
    (bad,) = st["unreadable_files"]
    assert bad.startswith(f"{rank}.zst: read error after ") and "truncated zstd frame" in bad
    assert st["empty_or_binary_files"] == [f"{job / 'node-002' / 'core.dump'}: not text (binary bytes; "
                                           f"read anyway, 9 lines)"]  # 8 newlines in the blob
    code, out, _ = l4("diagnose", str(job))
    assert "1 file(s) could not be read to the end" in out and "truncated zstd frame" in out
    assert "1 file(s) hold no log text (empty or binary)" in out


def test_demo_rejects_an_unknown_kind_in_one_line(l4) -> None:  # noqa: ANN001
    code, out, err = l4("demo", "--kind", "nonsense")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "--kind 'nonsense' is not a fault kind; known kinds: " in err and "xid79" in err


def test_demo_keep_leaves_the_job_and_says_how_to_rediagnose(l4, tmp_path: Path) -> None:  # noqa: ANN001
    keep = tmp_path / "kept"
    code, out, err = l4("demo", "--keep", str(keep), "--format", "json")
    assert code == 0, err
    assert (keep / "demo-job" / "failed" / "job.json").is_file()
    assert f"in {keep / 'demo-job'} (kept)" in err and f"l4 diagnose {keep / 'demo-job' / 'failed'}" in err
    code, _, err = l4("demo", "--keep", str(keep))
    assert code == 2 and "the folder exists and is not empty" in err


def test_demo_without_keep_names_no_folder_that_will_vanish(l4) -> None:  # noqa: ANN001
    code, out, err = l4("demo", "--format", "json")
    assert code == 0 and "deleted on exit (keep it with --keep DIR)" in err
    assert "l4-demo-" not in err and json.loads(out)["status"] == "matched"


def _helps(parser, prefix="l4"):  # noqa: ANN001, ANN202
    import argparse

    yield prefix, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _helps(sub, f"{prefix} {name}")


def test_help_texts_name_only_commands_that_exist() -> None:
    helps = dict(_helps(build_parser()))  # argparse wraps a help text at any space: read it as one line
    named = {m.group(1).split(" --")[0].strip() for text in helps.values()
             for m in re.finditer(r"`(l4 [a-z][a-z ]*?)(?: [A-Z-][^`]*)?`", re.sub(r"\s+", " ", text))}
    assert named, "no command named in any help text"
    missing = sorted(c for c in named if c not in helps)
    assert missing == [], missing
