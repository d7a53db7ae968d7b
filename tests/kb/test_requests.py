"""Durable bot requests and handled Slack deliveries, on SQLite and PostgreSQL."""
from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

from sqlalchemy.engine import Engine

from kb import db as kbdb
from kb import deliveries, requests
from kb.models import utcnow


def test_a_request_is_taken_once_requeued_and_finished(engine: Engine) -> None:
    with kbdb.session(engine) as s:
        row = requests.add(s, "job-1", "C1", "1.1", "U1")
        s.commit()
    assert row.id is not None and row.state == "queued"
    with kbdb.session(engine) as s:
        taken = requests.take(s, row.id, "me", 60)
        assert taken is not None and taken.state == "running" and taken.attempts == 1
        assert requests.take(s, row.id, "other", 60) is None  # already running
        requests.set_message(s, row.id, "9.9")
        assert requests.renew(s, "me", 120) == 1
        assert requests.requeue(s, row.id)
        again = requests.take(s, row.id, "me", 60)
        assert again is not None and again.attempts == 2 and again.message_ts == "9.9"
        requests.finish(s, row.id, "done")
        assert not requests.requeue(s, row.id)  # a finished request stays finished
        s.commit()
    with kbdb.session(engine) as s:
        assert requests.active(s) == []
        assert requests.get(s, row.id).state == "done"


def test_holder_gone_by_pid_token_and_lease(engine: Engine) -> None:
    me = requests.new_holder()
    host = me.rsplit(":", 2)[0]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    with kbdb.session(engine) as s:
        row = requests.add(s, "job-1", "C1", "1.1")
        future = utcnow() + timedelta(hours=1)
        cases = {f"{host}:{dead}:abcd": True,  # a process of this host that is gone
                 f"{host}:{os.getpid()}:other": True,  # this pid, but an earlier process (a restart)
                 f"{host}:{os.getppid()}:abcd": False,  # alive
                 me: False,
                 "elsewhere:1:abcd": False}  # another host: only its lease tells
        for holder, gone in cases.items():
            row.holder, row.lease_until = holder, future
            assert requests.holder_gone(row, me) is gone, holder
        row.holder, row.lease_until = "elsewhere:1:abcd", utcnow() - timedelta(seconds=1)
        assert requests.holder_gone(row, me)


def test_a_delivery_is_claimed_once_until_it_expires(engine: Engine) -> None:
    with kbdb.session(engine) as s:
        assert deliveries.claim(s, "event:Ev1")
        assert not deliveries.claim(s, "event:Ev1")
        deliveries.forget(s, "event:Ev1")
        assert deliveries.claim(s, "event:Ev1", ttl_seconds=-1)  # expired at once
        assert deliveries.claim(s, "event:Ev1")  # the expired one was purged
