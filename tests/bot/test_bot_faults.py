"""Faults against the real ``l4 bot`` process (HTTP mode and Socket Mode) and a fake Slack that
delays, fails and redelivers: every request ends with one diagnosis and a final message carrying its
ID (or a clear line) in its thread, none stays on "Diagnosing…", across kill -9 and SIGTERM too."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TypeVar

import pytest
from sqlmodel import select

from kb import db as kbdb
from kb.models import BotRequest, DiagnosisRecord
from tests.bot.slack.conftest import fault_job
from tests.helpers.fake_slack import FakeSlack
from tests.helpers.http_server import HttpServer
from tests.helpers.jobs import publish_gz
from tests.helpers.slack_bot import BotProcess, answer_id, thread_answer
from tests.helpers.slack_requests import message_event

DEV = "UDEV0001"
T = TypeVar("T")
SLOW_SECONDS = 60.0  # a report server this slow holds an analysis until the test lets it go


@pytest.fixture
def jobs(tmp_path: Path) -> Path:
    root = tmp_path / "jobs"
    for k in range(1, 8):
        fault_job(root / f"job-000{k}", fault_node=k % 3)
    return root


def _rows(tmp_path: Path, table: type[T]) -> list[T]:
    """The rows of ``table`` in the bot's knowledge base."""
    engine = kbdb.make_engine(f"sqlite:///{tmp_path / 'kb.db'}")
    try:
        with kbdb.session(engine) as s:
            return list(s.exec(select(table)))
    finally:
        engine.dispose()


def _requests(tmp_path: Path) -> list[BotRequest]:
    return _rows(tmp_path, BotRequest)


def _one_diagnosis_each(tmp_path: Path, threads: list[str]) -> None:
    per_thread: dict[str, int] = {}
    for d in _rows(tmp_path, DiagnosisRecord):
        per_thread[str(d.slack_thread_ts)] = per_thread.get(str(d.slack_thread_ts), 0) + 1
    assert {t: per_thread.get(t, 0) for t in threads} == {t: 1 for t in threads}


def _reports(srv: HttpServer, www: Path, first: int, n: int, delay: float) -> list[str]:
    """``n`` failure reports on ``srv`` answering after ``delay`` seconds; their links."""
    links = []
    for k in range(first, first + n):
        job = f"job-00{k:02d}"
        if not (www / "logs" / job).exists():
            publish_gz(www, job, nodes=2)
        srv.route(f"/reports/{k}", body=json.dumps({"job_id": job, "log_url": f"/logs/{job}/"}).encode(),
                  content_type="application/json", delay=delay)
        links.append(srv.url(f"/reports/{k}"))
    return links


def test_http_mode_slack_faults_and_redeliveries(tmp_path: Path, jobs: Path):
    def about(job: str):  # noqa: ANN202
        return lambda params: job in str(params)

    with FakeSlack() as slack:
        # the "Diagnosing…" post fails with a 500; with more 429s than the client retries; is answered
        # after the client gave up (found again, not posted twice); a progress edit is answered late
        slack.fail_matching("chat.postMessage", about("job-0002"), status=500, times=1)
        slack.fail_matching("chat.postMessage", about("job-0003"), status=429, error="ratelimited",
                            times=7, retry_after=0)
        slack.delay_matching("chat.postMessage", about("job-0004"), 6)
        slack.delay_matching("chat.update", about("job-0005"), 6)
        # the full summary is too long for Slack; the summaries meet 500s: shorter forms land
        slack.fail_matching("chat.update", lambda p: "job-0006" in str(p) and "e.g." in str(p),
                            status=200, error="msg_too_long")
        slack.fail_matching("chat.update", about("L4 diagnosis of job-0007"), times=2)
        bot = BotProcess(slack, tmp_path, log_root=jobs, L4_WORKERS="3", L4_SLACK_TIMEOUT="3")
        bot.start()
        try:
            bodies = [bot.event(message_event("C1", DEV, f"job-000{k} failed")) for k in range(1, 8)]
            bot.deliver(bodies[0], retry=1)  # redelivered twice (X-Slack-Retry-Num): one analysis
            bot.deliver(bodies[0], retry=2)
            threads = [b["event"]["ts"] for b in bodies]
            slack.wait_for(lambda s: all(answer_id(s, "C1", t) for t in threads))
            assert bot.terminate()[0] == 0  # drains: what is answered is recorded as done
        finally:
            bot.stop()
        late = threads[3]
        assert len([m for m in slack.thread("C1", late) if m.get("bot_id")]) == 1
        assert "e.g." not in str(thread_answer(slack, "C1", threads[5]))
        _one_diagnosis_each(tmp_path, threads)
        assert [r.state for r in _requests(tmp_path)] == ["done"] * 7
        assert bot.stderr().count("again: ignored") == 2
        assert "Traceback" not in bot.stderr(), bot.stderr()[-3000:]


def test_socket_mode_redelivery_kill_9_and_sigterm_lose_nothing(tmp_path: Path, jobs: Path):
    www = tmp_path / "www"
    with FakeSlack() as slack, HttpServer(folder=www) as srv:
        bot = BotProcess(slack, tmp_path, log_root=jobs, mode="socket", L4_WORKERS="5",
                         L4_DRAIN_SECONDS="2", L4_REPORT_HOSTS="127.0.0.1", L4_FETCH_TIMEOUT="120")
        bot.start()
        try:
            # a redelivery (retry_attempt) of an event starts nothing new
            body = bot.event(message_event("C1", DEV, "job-0001 failed"))
            bot.deliver(body, retry=1)
            first = body["event"]["ts"]
            slack.wait_for(lambda s: answer_id(s, "C1", first) is not None)

            # kill -9 while 5 analyses run, then start again: all 5 threads get their summary
            killed = [bot.event(message_event("C2", DEV, f"died: <{link}|r>"))["event"]["ts"]
                      for link in _reports(srv, www, 11, 5, SLOW_SECONDS)]
            srv_seen = lambda n: len(srv.seen("/reports/1")) >= n  # noqa: E731
            slack.wait_for(lambda s: srv_seen(5))
            bot.kill()
            _reports(srv, www, 11, 5, 0)
            bot.start()
            slack.wait_for(lambda s: all(answer_id(s, "C2", t) for t in killed))
            resumed = [c for c in slack.calls_to("chat.update")
                       if "resumed after the bot restarted" in str(c.params)]
            assert len(resumed) >= 5

            # SIGTERM while 5 analyses run: exit 0 within the grace period, the threads are told,
            # and the next start finishes them
            drained = [bot.event(message_event("C3", DEV, f"died: <{link}|r>"))["event"]["ts"]
                       for link in _reports(srv, www, 21, 5, SLOW_SECONDS)]
            slack.wait_for(lambda s: len(srv.seen("/reports/2")) >= 5)
            code, seconds = bot.terminate()
            # the grace of L4_DRAIN_SECONDS=2, not the analyses' end (SLOW_SECONDS away), however loaded
            assert code == 0 and seconds < SLOW_SECONDS / 2, (code, seconds)
            assert "running analyses get 2 s to finish" in bot.stderr()
            for t in drained:
                msg = [m for m in slack.thread("C3", t) if m.get("bot_id")][-1]
                assert "resumes when it is back" in str(msg["blocks"])
            _reports(srv, www, 21, 5, 0)
            bot.start()
            slack.wait_for(lambda s: all(answer_id(s, "C3", t) for t in drained))
            assert bot.terminate()[0] == 0
        finally:
            bot.stop()
        _one_diagnosis_each(tmp_path, [first, *killed, *drained])
        assert {r.state for r in _requests(tmp_path)} == {"done"}
        err = bot.stderr()
        assert "Traceback" not in err.replace("KeyboardInterrupt", ""), err[-3000:]
