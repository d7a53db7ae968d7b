from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import func, text
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from engine.model import Diagnosis, Match, NodeFinding
from kb import db as kbdb
from kb import diagnoses, feedback
from kb.models import DiagnosisRecord, FaultPattern, Feedback, NodeIncident
from tests.helpers.wait import WAIT


def test_default_url_is_sqlite_in_user_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(kbdb.ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    url = kbdb.database_url()
    assert url.startswith("sqlite:///") and url.endswith("/l4/l4.db")
    assert Path(url[len("sqlite:///"):]).parent.is_dir()


def test_env_var_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(kbdb.ENV_VAR, f"sqlite:///{tmp_path / 'x.db'}")
    assert kbdb.database_url() == f"sqlite:///{tmp_path / 'x.db'}"
    assert kbdb.database_url("sqlite:///other.db") == "sqlite:///other.db"


def test_sqlite_connection_settings(sqlite_engine) -> None:  # noqa: ANN001
    with sqlite_engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert c.exec_driver_sql("PRAGMA busy_timeout").scalar() == kbdb.SQLITE_BUSY_TIMEOUT_MS


def test_open_db_migrates_and_loads_library_once(db_url: str) -> None:
    eng = kbdb.open_db(db_url)
    try:
        assert kbdb.current_revision(eng) == kbdb.head_revision()
        with kbdb.session(eng) as s:
            n = s.exec(select(func.count()).select_from(FaultPattern)).one()
        assert n >= 60
        eng2 = kbdb.open_db(db_url)  # second open: nothing duplicated, nothing fails
        with kbdb.session(eng2) as s:
            assert s.exec(select(func.count()).select_from(FaultPattern)).one() == n
        eng2.dispose()
    finally:
        eng.dispose()


def test_foreign_keys_enforced(engine) -> None:  # noqa: ANN001
    with kbdb.session(engine) as s:
        s.add(NodeIncident(node="n1", job_id="j", diagnosis_id=987654))
        with pytest.raises(IntegrityError):
            s.commit()


def _diag(job: str, nodes: list[tuple[str, float]] = (), pattern: str | None = None) -> Diagnosis:
    matches = [Match(pattern_id=pattern, title="t", category="hardware/accelerator")] if pattern else []
    return Diagnosis(job_id=job, status="matched" if pattern else "analyzed", matches=matches,
                     nodes=[NodeFinding(node=n, score=sc) for n, sc in nodes])


def test_eight_concurrent_writers_lose_nothing(engine) -> None:  # noqa: ANN001
    threads_n, per_thread = 8, 12
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads_n)

    def work(t: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                with kbdb.session(engine) as s:
                    did = diagnoses.store(s, _diag(f"job-{t}-{i}", [(f"node-{t}", 0.9)],
                                                   "xid-79-fallen-off-bus"), {"model": f"m{t % 3}"})
                    s.commit()
                with kbdb.session(engine) as s:
                    feedback.reject(s, did, user=f"sre{t}", note=f"n{i}")
                    s.commit()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=WAIT)
    assert not errors, errors[:3]
    total = threads_n * per_thread
    with kbdb.session(engine) as s:
        assert s.exec(select(func.count()).select_from(DiagnosisRecord)).one() == total
        assert s.exec(select(func.count()).select_from(Feedback)).one() == total
        assert s.exec(select(func.count()).select_from(NodeIncident)).one() == total
        jobs = set(s.exec(select(DiagnosisRecord.job_id)))
        assert jobs == {f"job-{t}-{i}" for t in range(threads_n) for i in range(per_thread)}
        assert s.get(FaultPattern, "xid-79-fallen-off-bus").flagged


def test_session_rolls_back_on_error(sqlite_engine) -> None:  # noqa: ANN001
    with pytest.raises(RuntimeError):
        with kbdb.session(sqlite_engine) as s:
            diagnoses.store(s, _diag("rolled-back"), {})
            raise RuntimeError("boom")
    with sqlite_engine.connect() as c:
        assert c.execute(text("SELECT count(*) FROM diagnosis")).scalar() == 0
