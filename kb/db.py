"""Database URL defaults, engine creation, sessions and programmatic Alembic upgrades.

``L4_DATABASE_URL`` names the database (any SQLAlchemy URL; PostgreSQL via
``postgresql+psycopg://``); by default a SQLite file ``l4.db`` in the user's data folder.
SQLite connections get WAL, a busy timeout and foreign keys, and every transaction starts with
``BEGIN IMMEDIATE`` so concurrent writers queue on the busy timeout instead of failing.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, create_engine

from kb import KbError, models  # noqa: F401  (models registers the tables on SQLModel.metadata)

ENV_VAR = "L4_DATABASE_URL"
SQLITE_BUSY_TIMEOUT_MS = 30_000
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def default_url() -> str:
    """SQLite file in the user's data folder (created if missing)."""
    from platformdirs import user_data_dir

    folder = Path(user_data_dir("l4"))
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'l4.db'}"


def database_url(url: str | None = None) -> str:
    """The URL to use: ``url`` if given, else ``$L4_DATABASE_URL``, else :func:`default_url`."""
    return url or os.environ.get(ENV_VAR) or default_url()


class DatabaseUnavailable(KbError):
    """The knowledge base cannot be opened: a bad URL, an unreachable server, a path that cannot
    be written, a file that is not a database. The message is one line naming the URL or path."""


def is_in_memory(url: str | None = None) -> bool:
    """Whether the database (see :func:`database_url`) is an in-memory SQLite one, gone at exit."""
    try:
        parsed = make_url(database_url(url))
    except Exception:  # noqa: BLE001 - a bad URL is reported when it is opened
        return False
    if parsed.get_backend_name() != "sqlite":
        return False
    db = parsed.database or ""
    return db in ("", ":memory:") or (db.startswith("file:") and "mode=memory" in db) or db == "file::memory:"


def _where(url: str) -> str:
    """The URL as it may be shown (no password), and which setting it came from."""
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001
        shown = url
    return f"{ENV_VAR}={shown}" if os.environ.get(ENV_VAR) == url else shown


def _unavailable(url: str, exc: BaseException) -> DatabaseUnavailable:
    reason = str(getattr(exc, "orig", None) or exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    if isinstance(exc, OSError):
        reason = f"{exc.strerror or exc.__class__.__name__}: {exc.filename or ''}".rstrip(": ")
    try:
        parsed = make_url(url)
        path = parsed.database if parsed.get_backend_name() == "sqlite" else None
    except Exception:  # noqa: BLE001
        path = None
    if path and "file is not a database" in reason:
        reason = f"{path} is not a SQLite database"
    elif path and ("unable to open" in reason or "readonly" in reason):
        folder = Path(path).expanduser().resolve().parent
        reason = f"{reason} (can {folder} be written?)"
    return DatabaseUnavailable(f"cannot open the knowledge base {_where(url)}: {reason}"[:400])


def _sqlite_on_connect(dbapi_connection, connection_record) -> None:  # noqa: ANN001
    # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's implicit BEGIN is deferred).
    dbapi_connection.isolation_level = None
    cur = dbapi_connection.cursor()
    try:
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
    finally:
        cur.close()


def _sqlite_on_begin(conn) -> None:  # noqa: ANN001
    # Take the write lock up front: a deferred transaction that later upgrades from a read lock
    # to a write lock fails with "database is locked" without waiting on the busy timeout.
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str | None = None, *, echo: bool = False) -> Engine:
    """Create an engine for ``url`` (see :func:`database_url`) with the SQLite settings above."""
    url = database_url(url)
    try:
        return _make_engine(url, echo)
    except (SQLAlchemyError, OSError, ValueError) as exc:
        raise _unavailable(url, exc) from None


def _make_engine(url: str, echo: bool) -> Engine:
    parsed = make_url(url)
    kwargs: dict = {"echo": echo}
    if parsed.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    else:
        kwargs["pool_pre_ping"] = True
    engine = create_engine(url, **kwargs)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_on_connect)
        event.listen(engine, "begin", _sqlite_on_begin)
    return engine


def alembic_config() -> Config:
    """Alembic configuration built in code: no alembic.ini is needed at run time."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


_upgrade_lock = threading.Lock()


def _run_alembic(url_or_engine: str | Engine | None, action: Callable[[Config], None]) -> None:
    engine = url_or_engine if isinstance(url_or_engine, Engine) else make_engine(url_or_engine)
    cfg = alembic_config()
    try:
        with _upgrade_lock, engine.connect() as conn:
            sqlite = conn.dialect.name == "sqlite"
            raw = conn.connection.driver_connection if sqlite else None
            if raw is not None:
                # Batch migrations rebuild tables; SQLite only honours this outside a transaction.
                raw.execute("PRAGMA foreign_keys = OFF")
            try:
                with conn.begin():
                    if conn.dialect.name == "postgresql":
                        # Serialize concurrent upgrades from several processes (released at commit).
                        conn.execute(text("SELECT pg_advisory_xact_lock(4242424242)"))
                    cfg.attributes["connection"] = conn
                    action(cfg)
                if raw is not None:
                    bad = raw.execute("PRAGMA foreign_key_check").fetchall()
                    if bad:
                        raise RuntimeError(f"migration left foreign-key violations: {bad[:5]}")
            finally:
                if raw is not None:
                    raw.execute("PRAGMA foreign_keys = ON")
    finally:
        if not isinstance(url_or_engine, Engine):
            engine.dispose()


def upgrade(url_or_engine: str | Engine | None = None, revision: str = "head") -> None:
    """Bring the schema to ``revision`` (default: the newest)."""
    _run_alembic(url_or_engine, lambda cfg: command.upgrade(cfg, revision))


def downgrade(url_or_engine: str | Engine | None, revision: str) -> None:
    """Take the schema back to ``revision`` (for maintenance and tests)."""
    _run_alembic(url_or_engine, lambda cfg: command.downgrade(cfg, revision))


def open_db(url: str | None = None, *, load_library: bool = True) -> Engine:
    """Engine for the knowledge base, migrated to the newest schema, built-in library loaded."""
    url = database_url(url)
    engine = make_engine(url)
    try:
        upgrade(engine)
        if load_library:
            from kb import library

            with session(engine) as s:
                library.load(s)
                s.commit()
    except (SQLAlchemyError, OSError) as exc:
        engine.dispose()
        raise _unavailable(url, exc) from None
    return engine


@contextmanager
def session(engine: Engine) -> Iterator[Session]:
    """A session that keeps loaded objects usable after commit; rolls back on error."""
    with Session(engine, expire_on_commit=False) as s:
        try:
            yield s
        except BaseException:
            s.rollback()
            raise
