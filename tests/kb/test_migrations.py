from __future__ import annotations

from importlib import resources

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlmodel import SQLModel

from kb import db as kbdb


def _revisions() -> list[str]:
    script = ScriptDirectory.from_config(kbdb.alembic_config())
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def test_at_least_two_revisions_shipped_as_package_data() -> None:
    assert _revisions()[:3] == ["0001", "0002", "0003"]
    versions = resources.files("kb").joinpath("migrations/versions")
    names = {p.name for p in versions.iterdir()}
    assert any(n.startswith("0001_") for n in names) and any(n.startswith("0002_") for n in names)
    assert resources.files("kb").joinpath("migrations/env.py").is_file()


def test_upgrade_empty_database_matches_models(db_url: str) -> None:
    eng = kbdb.make_engine(db_url)
    try:
        assert kbdb.current_revision(eng) is None
        kbdb.upgrade(eng)
        assert kbdb.current_revision(eng) == kbdb.head_revision()
        with eng.connect() as c:
            diff = compare_metadata(MigrationContext.configure(c, opts={"compare_type": True}),
                                    SQLModel.metadata)
        assert diff == []
    finally:
        eng.dispose()


def test_upgrade_from_first_revision_keeps_data(db_url: str) -> None:
    eng = kbdb.make_engine(db_url)
    try:
        kbdb.upgrade(eng, "0001")
        assert kbdb.current_revision(eng) == "0001"
        cols = {c["name"] for c in sa.inspect(eng).get_columns("fault_pattern")}
        assert "flagged" not in cols
        with eng.begin() as c:
            c.execute(sa.text(
                "INSERT INTO fault_pattern (id, title, category, description, remediation, signature, kind,"
                " severity, source, created_by, created_at, enabled, version) VALUES ('old-pattern', 'Old',"
                " 'framework', '', '', '[{\"regex\": \"old failure\"}]', 'root', 'high', 'confirmed', 'me',"
                " CURRENT_TIMESTAMP, true, 1)"))
            c.execute(sa.text(
                "INSERT INTO diagnosis (job_id, status, json_text, matched_pattern_id, created_at)"
                " VALUES ('job-1', 'matched', '{}', 'old-pattern', CURRENT_TIMESTAMP)"))
        kbdb.upgrade(eng)
        assert kbdb.current_revision(eng) == kbdb.head_revision()
        with eng.connect() as c:
            row = c.execute(sa.text("SELECT title, flagged FROM fault_pattern WHERE id='old-pattern'")).one()
            assert row[0] == "Old" and not row[1]
            assert c.execute(sa.text("SELECT matched_pattern_id FROM diagnosis")).scalar() == "old-pattern"
        insp = sa.inspect(eng)
        assert "ix_node_incident_node_time" in {i["name"] for i in insp.get_indexes("node_incident")}
        assert "ix_diagnosis_job_id" in {i["name"] for i in insp.get_indexes("diagnosis")}
    finally:
        eng.dispose()


def test_downgrade_to_first_revision_and_back(db_url: str) -> None:
    eng = kbdb.open_db(db_url)
    try:
        kbdb.upgrade(eng)
        kbdb.downgrade(eng, "0001")
        assert kbdb.current_revision(eng) == "0001"
        kbdb.upgrade(eng)
        assert kbdb.current_revision(eng) == kbdb.head_revision()
    finally:
        eng.dispose()


def test_upgrade_from_second_revision_adds_the_bot_tables_and_keeps_data(db_url: str) -> None:
    eng = kbdb.make_engine(db_url)
    try:
        kbdb.upgrade(eng, "0002")
        assert not {"bot_request", "slack_delivery"} & set(sa.inspect(eng).get_table_names())
        with eng.begin() as c:
            c.execute(sa.text(
                "INSERT INTO diagnosis (job_id, status, json_text, created_at)"
                " VALUES ('job-2', 'analyzed', '{}', CURRENT_TIMESTAMP)"))
        kbdb.upgrade(eng)
        assert kbdb.current_revision(eng) == kbdb.head_revision()
        with eng.begin() as c:
            did = c.execute(sa.text("SELECT id FROM diagnosis WHERE job_id='job-2'")).scalar()
            c.execute(sa.text(
                "INSERT INTO bot_request (job_ref, channel, thread_ts, state, attempts, diagnosis_id,"
                " created_at, updated_at) VALUES ('job-2', 'C1', '1.1', 'done', 1, :d, CURRENT_TIMESTAMP,"
                " CURRENT_TIMESTAMP)"), {"d": did})
        insp = sa.inspect(eng)
        assert "ix_bot_request_state" in {i["name"] for i in insp.get_indexes("bot_request")}
        assert "ix_slack_delivery_expires_at" in {i["name"] for i in insp.get_indexes("slack_delivery")}
        kbdb.downgrade(eng, "0002")
        assert not {"bot_request", "slack_delivery"} & set(sa.inspect(eng).get_table_names())
        with eng.connect() as c:
            assert c.execute(sa.text("SELECT count(*) FROM diagnosis")).scalar() == 1
    finally:
        eng.dispose()


def test_upgrade_from_third_revision_keys_the_active_requests_and_adds_leases(db_url: str) -> None:
    from kb import requests

    eng = kbdb.make_engine(db_url)
    try:
        kbdb.upgrade(eng, "0003")
        with eng.begin() as c:  # two bots before 0004 could both have the same job active
            for ref, state in (("job-3", "running"), ("job-3/", "queued"), ("job-4", "done")):
                c.execute(sa.text(
                    "INSERT INTO bot_request (job_ref, channel, thread_ts, state, attempts, created_at,"
                    " updated_at) VALUES (:r, 'C1', '1.1', :s, 1, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"),
                    {"r": ref, "s": state})
        kbdb.upgrade(eng)
        with eng.connect() as c:
            keys = c.execute(sa.text("SELECT job_ref, job_key FROM bot_request ORDER BY id")).all()
        assert keys == [("job-3", requests.job_key("job-3")), ("job-3/", None), ("job-4", None)]
        assert "lease" in sa.inspect(eng).get_table_names()
        kbdb.downgrade(eng, "0003")
        assert "lease" not in sa.inspect(eng).get_table_names()
        assert "job_key" not in {col["name"] for col in sa.inspect(eng).get_columns("bot_request")}
        with eng.connect() as c:
            assert c.execute(sa.text("SELECT count(*) FROM bot_request")).scalar() == 3
    finally:
        eng.dispose()
