"""Alembic environment, driven from kb.db.upgrade (connection passed in cfg.attributes)."""
from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlmodel import SQLModel

import kb.models  # noqa: F401  (registers the tables)

config = context.config
target_metadata = SQLModel.metadata


# Tables in the same database that Alembic does not own (autogenerate must not drop them):
# the digest scheduler's job store (bot/scheduler.py).
FOREIGN_TABLES = {"apscheduler_jobs"}


def _include_name(name, type_, parent_names) -> bool:  # noqa: ANN001
    return not (type_ == "table" and name in FOREIGN_TABLES)


def _configure(connection) -> None:  # noqa: ANN001
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=_include_name,
    )


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.get_main_option("sqlalchemy.url")
    engine = create_engine(url)
    with engine.connect() as conn:
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported; use kb.db.upgrade")
run_migrations_online()
