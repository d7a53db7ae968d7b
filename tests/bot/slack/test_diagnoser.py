"""The worker pool of the bot over durable requests: a bounded queue, a drain that tells the queued
askers, a restart that resumes them, and answers that survive Slack refusing the long form."""
from __future__ import annotations

import threading
from pathlib import Path

from sqlmodel import select

from bot.config import Settings
from bot.slack.client import make_web_client
from bot.slack.diagnoser import MAX_ATTEMPTS, Accepted, Busy, Diagnoser
from bot.triage import triage
from kb import db as kbdb
from kb import requests
from kb.models import BotRequest, DiagnosisRecord
from tests.helpers.fake_slack import FakeSlack
from tests.helpers.wait import WAIT


def _settings(slack: FakeSlack, tmp_path: Path, log_root: Path, **kw: object) -> Settings:
    return Settings(slack_bot_token="xoxb-test", slack_api_url=slack.api_url, workers=1,
                    database_url=f"sqlite:///{tmp_path / 'kb.db'}", log_root=str(log_root), **kw)


def _rows(d: Diagnoser) -> dict[str, BotRequest]:
    with kbdb.session(d.engine) as s:
        return {r.job_ref: r for r in s.exec(select(BotRequest))}


def test_busy_queue_drain_tells_the_queued_and_a_restart_resumes_them(tmp_path: Path, log_root: Path):
    gate = threading.Event()

    def slow(req, **kw):
        assert gate.wait(30)
        return triage(req, **kw)

    with FakeSlack() as slack:
        settings = _settings(slack, tmp_path, log_root)
        diagnoser = Diagnoser(settings, make_web_client(settings), run_triage=slow, max_queued=2)
        running = diagnoser.request("job-0001", "C1", "1.1")
        queued = diagnoser.request("job-0002", "C1", "2.2")
        turned_away = diagnoser.request("job-0003", "C1", "3.3")
        assert isinstance(running, Accepted) and isinstance(queued, Accepted)
        assert isinstance(turned_away, Busy)
        busy = slack.wait_for_call("chat.postMessage", where=lambda c: "busy" in str(c.params))[0]
        assert busy.params["thread_ts"] == "3.3" and not diagnoser.inflight.running().get("job-0003")
        assert set(_rows(diagnoser)) == {"job-0001", "job-0002"}  # written before anything was posted

        assert diagnoser.drain(0) == 2
        told = slack.wait_for_call("chat.update", where=lambda c: "restarting" in str(c.params))
        assert {c.params["ts"] for c in told} >= {queued.message_ts}
        gate.set()
        diagnoser.pool.shutdown(wait=True)
        summary = slack.wait_for_call("chat.update", where=lambda c: "Confirm" in str(c.params))
        assert summary[0].params["ts"] == running.message_ts  # the running analysis still finished
        rows = _rows(diagnoser)
        assert rows["job-0001"].state == "done" and rows["job-0001"].diagnosis_id is not None
        assert rows["job-0002"].state == "queued" and rows["job-0002"].message_ts == queued.message_ts

        after = Diagnoser(settings, make_web_client(settings))  # the next start: analyses in processes
        try:
            assert after.resume() == 1
            assert after.wait_idle(WAIT)
            final = slack.messages[("C1", queued.message_ts)]
            assert "L4 diagnosis of job-0002" in str(final["blocks"])  # the same message, answered
            assert _rows(after)["job-0002"].state == "done"
        finally:
            after.shutdown()
            after.engine.dispose()
        diagnoser.engine.dispose()


def test_cut_off_requests_are_delivered_rerun_or_given_up(tmp_path: Path, log_root: Path):
    """Rows a killed bot left running: stored ones are delivered (not analysed again), others run
    again, and one that was tried MAX_ATTEMPTS times ends with "ask again"."""
    calls: list[str] = []

    def counting(req, **kw):
        calls.append(req.job)
        return triage(req, **kw)

    with FakeSlack() as slack:
        settings = _settings(slack, tmp_path, log_root)
        engine = kbdb.open_db(settings.database_url)
        first = Diagnoser(settings, make_web_client(settings), run_triage=triage, engine=engine)
        done = first.request("job-0001", "C1", "1.1")
        assert isinstance(done, Accepted) and first.wait_idle(WAIT)
        first.shutdown()
        dead = "nohost:1:dead"
        with kbdb.session(engine) as s:
            stored = s.exec(select(DiagnosisRecord)).one().id
            cut_off = (("job-0001", "4.4", 1, stored), ("job-0002", "5.5", 1, None),
                       ("job-0003", "6.6", MAX_ATTEMPTS, None))
            for ref, thread, attempts, diagnosis in cut_off:
                row = requests.add(s, ref, "C2", thread)
                row.state, row.attempts, row.holder, row.diagnosis_id = "running", attempts, dead, diagnosis
                row.lease_until = requests.utcnow().replace(year=2000)
                s.add(row)
            s.commit()
        slack.fail_next("chat.update", status=200, error="msg_too_long", retry_after=None, times=1)
        again = Diagnoser(settings, make_web_client(settings), run_triage=counting, engine=engine)
        try:
            assert again.resume() == 3
            assert again.wait_idle(WAIT)
        finally:
            again.shutdown()
        assert calls == ["job-0002"]  # the stored one was delivered, the given-up one not run
        by_thread = {m["thread_ts"]: m for m in slack.messages.values() if m.get("thread_ts")}
        assert f"#{stored}" in str(by_thread["4.4"]) and "l4_confirm" in str(by_thread["4.4"]["blocks"])
        assert "L4 diagnosis of job-0002" in str(by_thread["5.5"]["blocks"])
        assert "ask again" in by_thread["6.6"]["text"]
        assert not any("Diagnosing" in str(m.get("text")) for m in by_thread.values())
        states = {r.thread_ts: r.state for r in _rows(again).values() if r.channel == "C2"}
        assert states == {"4.4": "done", "5.5": "done", "6.6": "abandoned"}
        engine.dispose()
