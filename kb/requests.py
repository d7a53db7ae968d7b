"""The Slack bot's durable requests (``bot_request`` rows) and who holds them.

A request is added ``queued`` before Slack is acknowledged; a worker ``take``s it (``running``, one
more attempt, its holder and lease); the result is recorded (``set_diagnosis`` in the same
transaction that stores the diagnosis, or ``set_final_text``) and the row ends ``done``, ``failed``
or ``abandoned`` once the thread has its last message. At start the bot looks at ``unfinished()``
rows: queued ones, and running ones whose holder is gone (``holder_gone``). Callers commit.
"""
from __future__ import annotations

import os
import secrets
import socket
from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from sqlmodel import Session, col, select

from kb import KbError
from kb.models import ACTIVE_REQUEST_STATES, BotRequest, utcnow

FINAL_STATES = ("done", "failed", "abandoned")


def add(session: Session, job_ref: str, channel: str, thread_ts: str, requester: str | None = None,
        ) -> BotRequest:
    """A new queued request (flushed: it has its id)."""
    row = BotRequest(job_ref=job_ref, channel=channel, thread_ts=thread_ts, requester=requester)
    session.add(row)
    session.flush()
    return row


def get(session: Session, request_id: int) -> BotRequest:
    row = session.get(BotRequest, request_id, populate_existing=True)
    if row is None:
        raise KbError(f"no bot request with id {request_id}")
    return row


def _update(session: Session, request_id: int, *states: str, **values: object) -> bool:
    """Set ``values`` on the row if it is in one of ``states`` (any when none); True if it was."""
    stmt = update(BotRequest).where(col(BotRequest.id) == request_id)
    if states:
        stmt = stmt.where(col(BotRequest.state).in_(states))
    result = session.execute(stmt.values(updated_at=utcnow(), **values))
    return bool(result.rowcount)


def take(session: Session, request_id: int, holder: str, lease_seconds: float) -> BotRequest | None:
    """Start an attempt on a queued request: running, held by ``holder``. None when it is not
    queued (another worker has it, or it is finished)."""
    now = utcnow()
    stmt = (update(BotRequest).where(col(BotRequest.id) == request_id, col(BotRequest.state) == "queued")
            .values(state="running", attempts=BotRequest.attempts + 1, holder=holder,
                    lease_until=now + timedelta(seconds=lease_seconds), started_at=now, updated_at=now))
    if not session.execute(stmt).rowcount:
        return None
    return get(session, request_id)


def set_message(session: Session, request_id: int, message_ts: str) -> None:
    """Remember the progress message of the request's thread."""
    _update(session, request_id, message_ts=message_ts)


def set_diagnosis(session: Session, request_id: int, diagnosis_id: int) -> None:
    """The request's diagnosis is stored (call in the transaction that stores it)."""
    _update(session, request_id, diagnosis_id=diagnosis_id)


def set_final_text(session: Session, request_id: int, text: str) -> None:
    """Why the request could not be diagnosed, to tell its thread (it may still be delivering)."""
    _update(session, request_id, final_text=text)


def finish(session: Session, request_id: int, state: str) -> None:
    """The thread has its last message: the request ends ``state`` (done, failed or abandoned)."""
    if state not in FINAL_STATES:
        raise KbError(f"not a final request state: {state}")
    _update(session, request_id, state=state, holder=None, lease_until=None, finished_at=utcnow())


def requeue(session: Session, request_id: int) -> bool:
    """Put a request back in the queue (cut off before it finished); False if it had finished."""
    return _update(session, request_id, *ACTIVE_REQUEST_STATES, state="queued", holder=None,
                   lease_until=None)


def renew(session: Session, holder: str, lease_seconds: float) -> int:
    """Extend the lease of every request ``holder`` is running; returns how many."""
    stmt = (update(BotRequest).where(col(BotRequest.holder) == holder, col(BotRequest.state) == "running")
            .values(lease_until=utcnow() + timedelta(seconds=lease_seconds)))
    return int(session.execute(stmt).rowcount or 0)


def active(session: Session) -> list[BotRequest]:
    """Queued and running requests, oldest first."""
    return list(session.exec(select(BotRequest).where(col(BotRequest.state).in_(ACTIVE_REQUEST_STATES))
                             .order_by(col(BotRequest.id))))


# -- holders -------------------------------------------------------------------------------------
def new_holder() -> str:
    """``host:pid:token``: this process, told apart from an earlier one that had the same pid."""
    return f"{socket.gethostname()[:120]}:{os.getpid()}:{secrets.token_hex(4)}"


def holder_gone(row: BotRequest, me: str) -> bool:
    """Whether the worker holding a running request is gone: its lease ran out, or it was a process
    on this host that no longer runs (or an earlier process with this process's pid)."""
    if row.holder is None or row.holder == me:
        return row.holder is None
    if row.lease_until is not None and _aware(row.lease_until) < utcnow():
        return True
    parts = row.holder.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname()[:120]:
        return False  # another host's worker: only its lease tells
    try:
        pid = int(parts[1])
    except ValueError:
        return True
    if pid == os.getpid():
        return True  # the same pid but another token: a process before this one (a container restart)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)  # SQLite may hand back naive UTC
