"""Named leases and requests shared by several bots on one database (SQLite and PostgreSQL)."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from kb import db as kbdb
from kb import leases, requests
from kb.models import utcnow


def test_a_lease_is_held_by_one_until_it_expires_or_is_released(engine: Engine) -> None:
    with kbdb.session(engine) as s:
        assert leases.acquire(s, "digest:C1:x", "a", 60)
        assert not leases.acquire(s, "digest:C1:x", "b", 60)
        assert leases.acquire(s, "digest:C1:x", "a", 60)  # its holder renews it
        assert leases.holder_of(s, "digest:C1:x") == "a"
        assert not leases.renew(s, "digest:C1:x", "b", 60) and leases.renew(s, "digest:C1:x", "a", 60)
        assert not leases.release(s, "digest:C1:x", "b") and leases.release(s, "digest:C1:x", "a")
        assert leases.acquire(s, "digest:C1:x", "b", -1)  # held, but expired at once
        assert leases.holder_of(s, "digest:C1:x") is None
        assert leases.acquire(s, "digest:C1:x", "c", 60)  # an expired lease is taken over
        assert leases.purge(s, "digest:", utcnow() + timedelta(hours=1)) == 1
        s.commit()


def test_of_many_asking_at_once_one_gets_the_lease(engine: Engine) -> None:
    won: list[str] = []
    start = threading.Barrier(6)

    def ask(who: str) -> None:
        start.wait()
        with kbdb.session(engine) as s:
            if leases.acquire(s, "digest:C1:2026-12-01T09:00:00+00:00", who, 60):
                won.append(who)
            s.commit()

    threads = [threading.Thread(target=ask, args=(f"bot{k}",)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1


def test_one_active_request_per_job_across_bots(engine: Engine) -> None:
    with kbdb.session(engine) as s:
        first = requests.add(s, "job-7", "C1", "1.1", holder="a:1:x", lease_seconds=60)
        s.commit()
    with kbdb.session(engine) as s, pytest.raises(requests.JobActive) as e:
        requests.add(s, " job-7/ ", "C2", "2.2", holder="b:1:y", lease_seconds=60)
    assert e.value.row.id == first.id and e.value.row.thread_ts == "1.1"
    with kbdb.session(engine) as s:
        assert requests.take(s, first.id, "b:1:y", 60) is None  # held by a, not b's to take
        assert requests.take(s, first.id, "a:1:x", 60) is not None
        requests.finish(s, first.id, "done")
        again = requests.add(s, "job-7", "C2", "2.2")  # finished: the job may be asked for again
        s.commit()
    assert again.id != first.id


def test_a_gone_holders_request_is_adopted_by_one_bot(engine: Engine) -> None:
    with kbdb.session(engine) as s:
        row = requests.add(s, "job-8", "C1", "1.1", holder="elsewhere:1:x", lease_seconds=60)
        requests.take(s, row.id, "elsewhere:1:x", -1)  # running, its lease ran out: the host died
        s.commit()
    with kbdb.session(engine) as s:
        seen = requests.get(s, row.id)
    assert requests.holder_gone(seen, "b:1:y")
    with kbdb.session(engine) as s:
        assert requests.adopt(s, seen, "b:1:y", 60)
        assert not requests.adopt(s, seen, "c:1:z", 60)  # what c read is stale: b has it
        assert requests.renew(s, "b:1:y", 60) == 1
        assert requests.requeue(s, row.id, "b:1:y", 60)
        assert requests.take(s, row.id, "c:1:z", 60) is None
        assert requests.take(s, row.id, "b:1:y", 60).attempts == 2
        s.commit()


def test_a_stopping_bot_releases_its_queued_requests(engine: Engine) -> None:
    with kbdb.session(engine) as s:
        queued = requests.add(s, "job-9", "C1", "1.1", holder="a:1:x", lease_seconds=60)
        running = requests.add(s, "job-10", "C1", "2.2", holder="a:1:x", lease_seconds=60)
        requests.take(s, running.id, "a:1:x", 60)
        assert requests.release_all(s, "a:1:x") == 1
        s.commit()
    with kbdb.session(engine) as s:
        assert requests.get(s, queued.id).holder is None
        assert requests.get(s, running.id).holder == "a:1:x"
