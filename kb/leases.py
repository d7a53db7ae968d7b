"""Named leases in the knowledge base (``lease`` rows): one bot process among several on the same
database holds a name until the lease expires or it lets go.

``acquire`` is atomic on SQLite and PostgreSQL alike (an insert that does nothing on conflict, then
a take-over that only matches an expired row), so of several bots asking at the same moment exactly
one gets ``True``. The holder is a ``kb.requests.new_holder()`` string. Callers commit.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, insert, update
from sqlmodel import Session, col

from kb.models import Lease, utcnow


def _insert_new(session: Session, name: str, holder: str, now: datetime, until: datetime) -> bool:
    """Insert the row unless ``name`` exists; True when this call inserted it."""
    values = {"name": name, "holder": holder, "acquired_at": now, "expires_at": until}
    dialect = session.get_bind().dialect.name
    if dialect in ("postgresql", "sqlite"):
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        stmt = (dialect_insert(Lease).values(**values).on_conflict_do_nothing(index_elements=["name"])
                .returning(col(Lease.name)))  # rowcount is not reliable for an insert on every driver
        return session.execute(stmt).first() is not None
    from sqlalchemy.exc import IntegrityError

    try:
        with session.begin_nested():
            session.execute(insert(Lease).values(**values))
    except IntegrityError:
        return False
    return True


def acquire(session: Session, name: str, holder: str, seconds: float) -> bool:
    """Hold ``name`` for ``seconds`` from now: True when it was free, expired, or already held by
    ``holder`` (then renewed); False while another holder's lease runs."""
    name = name[:200]
    now = utcnow()
    until = now + timedelta(seconds=seconds)
    if _insert_new(session, name, holder, now, until):
        return True
    stmt = (update(Lease).where(col(Lease.name) == name)
            .where((col(Lease.holder) == holder) | (col(Lease.expires_at) < now))
            .values(holder=holder, acquired_at=now, expires_at=until))
    return bool(session.execute(stmt).rowcount)


def renew(session: Session, name: str, holder: str, seconds: float) -> bool:
    """Extend ``holder``'s lease on ``name``; False when it no longer holds it."""
    stmt = (update(Lease).where(col(Lease.name) == name[:200], col(Lease.holder) == holder)
            .values(expires_at=utcnow() + timedelta(seconds=seconds)))
    return bool(session.execute(stmt).rowcount)


def release(session: Session, name: str, holder: str) -> bool:
    """Let go of ``name`` (only ``holder``'s own lease); True when it held it."""
    stmt = delete(Lease).where(col(Lease.name) == name[:200], col(Lease.holder) == holder)
    return bool(session.execute(stmt).rowcount)


def holder_of(session: Session, name: str) -> str | None:
    """Who holds ``name`` now (None when nobody does, or the lease expired)."""
    row = session.get(Lease, name[:200], populate_existing=True)
    if row is None:
        return None
    expires = row.expires_at if row.expires_at.tzinfo else row.expires_at.replace(tzinfo=utcnow().tzinfo)
    return row.holder if expires >= utcnow() else None


def purge(session: Session, prefix: str, before: datetime) -> int:
    """Delete the leases named ``prefix…`` that expired before ``before``; returns how many."""
    stmt = delete(Lease).where(col(Lease.name).startswith(prefix), col(Lease.expires_at) < before)
    return int(session.execute(stmt).rowcount or 0)
