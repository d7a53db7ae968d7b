"""Fixtures of the knowledge-base tests: SQLite files in tmp_path and, when PostgreSQL server
binaries exist on the machine, a throwaway PostgreSQL cluster (tests/helpers/postgres.py, registered
by tests/conftest.py)."""
from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'kb.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on a SQLite file and on PostgreSQL (skipped when no server can be had)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'kb.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    from kb.db import open_db

    eng = open_db(db_url)
    yield eng
    eng.dispose()


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    from kb.db import open_db

    eng = open_db(sqlite_url)
    yield eng
    eng.dispose()
