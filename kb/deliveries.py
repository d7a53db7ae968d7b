"""Slack deliveries already handled (``slack_delivery`` rows): an event ID or an interaction's
trigger ID is claimed once; a redelivery of it within the TTL is recognised, across restarts."""
from __future__ import annotations

from datetime import timedelta

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from kb.models import SlackDelivery, utcnow

DEFAULT_TTL_SECONDS = 24 * 3600  # Slack redelivers within minutes; a day is ample and cheap


def claim(session: Session, key: str, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> bool:
    """True the first time ``key`` is seen (it is recorded), False for a redelivery. Expired keys
    are purged on the way. Commits."""
    now = utcnow()
    session.execute(delete(SlackDelivery).where(col(SlackDelivery.expires_at) < now))
    if session.get(SlackDelivery, key) is not None:
        session.commit()
        return False
    session.add(SlackDelivery(key=key[:200], seen_at=now, expires_at=now + timedelta(seconds=ttl_seconds)))
    try:
        session.commit()
    except IntegrityError:  # claimed at the same moment by another process
        session.rollback()
        return False
    return True


def forget(session: Session, key: str) -> None:
    """Let ``key`` be handled again (its handling failed before Slack was answered). Commits."""
    session.execute(delete(SlackDelivery).where(col(SlackDelivery.key) == key[:200]))
    session.commit()
