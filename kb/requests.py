"""The Slack bot's durable requests (``bot_request`` rows) and who holds them.

A request is added ``queued`` before Slack is acknowledged; a worker ``take``s it (``running``, one
more attempt, its holder and lease); the result is recorded (``set_diagnosis`` in the same
transaction that stores the diagnosis, or ``set_final_text``) and the row ends ``done``, ``failed``
or ``abandoned`` once the thread has its last message. At start the bot looks at ``unfinished()``
rows: queued ones, and running ones whose holder is gone (``holder_gone``). Callers commit.

Several bots may share the database: a queued or running row names the job (``job_key``) under a
unique index over the active rows, so ``add`` of a job another bot (or this one) already has raises
``JobActive`` with that row; every active row has a holder whose lease it renews while it lives
(``renew``), and another bot ``adopt``s the rows of a holder that is gone.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import socket
from datetime import UTC, datetime, timedelta

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from kb import KbError
from kb.models import ACTIVE_REQUEST_STATES, BotRequest, utcnow

FINAL_STATES = ("done", "failed", "abandoned")


class JobActive(KbError):
    """The job already has a queued or running request (``row``: where its thread is)."""

    def __init__(self, row: BotRequest) -> None:
        super().__init__(f"{row.job_ref[:200]} is already requested (request {row.id})")
        self.row = row


def job_key(ref: str) -> str:
    """What makes two requests the same job: the sha256 of the ref without spaces and a trailing /."""
    return hashlib.sha256(ref.strip().rstrip("/").encode("utf-8", "surrogatepass")).hexdigest()


def add(session: Session, job_ref: str, channel: str, thread_ts: str, requester: str | None = None,
        holder: str | None = None, lease_seconds: float | None = None) -> BotRequest:
    """A new queued request (flushed: it has its id), held by ``holder`` for ``lease_seconds`` when
    given. Raises JobActive when the job has a queued or running request already."""
    row = BotRequest(job_ref=job_ref, job_key=job_key(job_ref), channel=channel, thread_ts=thread_ts,
                     requester=requester, holder=holder,
                     lease_until=utcnow() + timedelta(seconds=lease_seconds) if holder and lease_seconds
                     else None)
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError:  # the savepoint is rolled back, the new row gone with it
        current = active_for(session, job_ref)
        if current is None:
            raise  # another constraint
        raise JobActive(current) from None
    return row


def active_for(session: Session, job_ref: str) -> BotRequest | None:
    """The queued or running request of the job ``job_ref`` names, if any."""
    return session.exec(select(BotRequest).where(col(BotRequest.job_key) == job_key(job_ref),
                                                 col(BotRequest.state).in_(ACTIVE_REQUEST_STATES))
                        .execution_options(populate_existing=True)).first()


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
    """Start an attempt on a queued request nobody else holds: running, held by ``holder``. None
    when it is not (another worker has it, or it is finished)."""
    now = utcnow()
    stmt = (update(BotRequest).where(col(BotRequest.id) == request_id, col(BotRequest.state) == "queued",
                                     col(BotRequest.holder).is_(None) | (col(BotRequest.holder) == holder))
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


def requeue(session: Session, request_id: int, holder: str | None = None,
            lease_seconds: float | None = None) -> bool:
    """Put a request back in the queue (cut off before it finished); False if it had finished.
    With ``holder`` it stays held by it (to be taken again at once), else anyone may take it."""
    until = utcnow() + timedelta(seconds=lease_seconds) if holder and lease_seconds else None
    return _update(session, request_id, *ACTIVE_REQUEST_STATES, state="queued", holder=holder,
                   lease_until=until)


def adopt(session: Session, row: BotRequest, holder: str, lease_seconds: float) -> bool:
    """Take over an active request whose holder is gone (``holder_gone``): it is held by ``holder``
    now, if its holder and lease are still what ``row`` read (else another bot adopted it first)."""
    stmt = (update(BotRequest)
            .where(col(BotRequest.id) == row.id, col(BotRequest.state).in_(ACTIVE_REQUEST_STATES),
                   col(BotRequest.holder).is_not_distinct_from(row.holder),
                   col(BotRequest.lease_until).is_not_distinct_from(row.lease_until))
            .values(holder=holder, lease_until=utcnow() + timedelta(seconds=lease_seconds),
                    updated_at=utcnow()))
    return bool(session.execute(stmt).rowcount)


def release_all(session: Session, holder: str) -> int:
    """Let go of the queued requests ``holder`` has (it is stopping), for any bot to take; a running
    one stays held until its analysis ends (then ``requeue`` lets go of it)."""
    stmt = (update(BotRequest).where(col(BotRequest.holder) == holder, col(BotRequest.state) == "queued")
            .values(holder=None, lease_until=None, updated_at=utcnow()))
    return int(session.execute(stmt).rowcount or 0)


def renew(session: Session, holder: str, lease_seconds: float) -> int:
    """Extend the lease of every queued or running request ``holder`` has; returns how many."""
    stmt = (update(BotRequest).where(col(BotRequest.holder) == holder,
                                     col(BotRequest.state).in_(ACTIVE_REQUEST_STATES))
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
    """Whether the worker holding an active request is gone. A process of this host is asked
    directly: gone when it no longer runs (or it was an earlier process with this process's pid),
    alive otherwise, even when a slow beat let its lease run out. For another host's worker only its
    lease tells."""
    if row.holder is None or row.holder == me:
        return row.holder is None
    expired = row.lease_until is not None and _aware(row.lease_until) < utcnow()
    parts = row.holder.rsplit(":", 2)
    if len(parts) != 3 or parts[0] != socket.gethostname()[:120]:
        return expired  # another host's worker: only its lease tells
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
        return expired  # another user's process with that pid: the lease tells
    return False


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)  # SQLite may hand back naive UTC
