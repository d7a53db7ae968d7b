"""Two real ``l4 bot`` processes (HTTP mode) on one throwaway PostgreSQL and the fake Slack: 20
requests with duplicates spread over both give one analysis per job; the digest both schedule every
ten seconds (a cron with seconds) is posted once per run; one bot killed with kill -9
mid-analysis, the other takes over its requests within the lease and answers them. Skipped without
PostgreSQL server binaries."""
from __future__ import annotations

import json
import re
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

from sqlmodel import select

from kb import db as kbdb
from kb.models import BotRequest, DiagnosisRecord, Lease
from tests.helpers.fake_slack import FakeSlack
from tests.helpers.http_server import HttpServer
from tests.helpers.jobs import publish_gz
from tests.helpers.slack_bot import BotProcess, answer_id
from tests.helpers.slack_requests import message_event
from tests.helpers.wait import WAIT

DEV = "UDEV0001"
LEASE = 15.0  # L4_LEASE_SECONDS of both bots: renewed (and dead bots looked for) every 5 s
DIGEST = "C0DIGEST"
POSTED = re.compile(rf"digest run of (\S+) \(\d+ days\) posted to {DIGEST}")
OTHER = re.compile(rf"digest run of (\S+) for {DIGEST}: posted by another bot")


def _report(srv: HttpServer, www: Path, k: int, delay: float) -> str:
    job = f"job-00{k:02d}"
    if not (www / "logs" / job).exists():
        publish_gz(www, job, nodes=2)
    srv.route(f"/reports/{k}", body=json.dumps({"job_id": job, "log_url": f"/logs/{job}/"}).encode(),
              content_type="application/json", delay=delay)
    return srv.url(f"/reports/{k}")


def _digest_posts(slack: FakeSlack) -> list[datetime]:
    """When each digest was posted in the digest channel (not its thread replies)."""
    return [datetime.fromtimestamp(c.at, UTC) for c in slack.calls_to("chat.postMessage")
            if c.params.get("channel") == DIGEST and not c.params.get("thread_ts")]


def _runs(bot: BotProcess, pattern: re.Pattern) -> list[datetime]:
    """The digest runs (their scheduled times) ``bot`` logged as posted by itself or by another."""
    return [datetime.fromisoformat(t) for t in pattern.findall(bot.stderr())]


def _run_of_both(a: BotProcess, b: BotProcess, after: datetime, timeout: float) -> datetime | None:
    """A run at or after ``after`` that one bot posted and the other found posted (both ran it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for one, other in ((a, b), (b, a)):
            shared = {t for t in _runs(one, POSTED) if t >= after} & set(_runs(other, OTHER))
            if shared:
                return min(shared)
        time.sleep(0.2)
    return None


def test_two_bots_one_postgres(tmp_path: Path, postgres_url: str) -> None:
    www, jobs = tmp_path / "www", tmp_path / "jobs"
    jobs.mkdir()
    with FakeSlack() as slack, HttpServer(folder=www) as srv:
        env = {"L4_DATABASE_URL": postgres_url, "L4_WORKERS": "4", "L4_LEASE_SECONDS": str(LEASE),
               "L4_REPORT_HOSTS": "127.0.0.1", "L4_FETCH_TIMEOUT": "120", "L4_DRAIN_SECONDS": "2",
               "L4_DIGEST_CHANNEL": DIGEST, "L4_DIGEST_CRON": "*/10 * * * * *"}
        a = BotProcess(slack, tmp_path / "a", log_root=jobs, **env)
        b = BotProcess(slack, tmp_path / "b", log_root=jobs, **env)
        for bot in (a, b):
            bot.log.parent.mkdir()
        starting = [threading.Thread(target=bot.start, kwargs={"timeout": 300}) for bot in (a, b)]
        for t in starting:  # at once: opening the database and loading the library take a while
            t.start()
        for t in starting:
            t.join()
        assert a.url and b.url, (a.stderr()[-2000:], b.stderr()[-2000:])
        both_up = datetime.now(UTC)
        try:
            # 20 requests for 8 jobs, each job asked 2-3 times, spread over both bots, while the
            # first analysis of each still waits on its slow report server
            links = [_report(srv, www, k, delay=6) for k in range(1, 9)]
            asked: dict[str, list[str]] = {}
            for i in range(20):
                link = links[i % 8]
                body = (a, b)[i % 2].event(message_event("C1", DEV, f"failed: <{link}|report>"))
                asked.setdefault(link, []).append(body["event"]["ts"])
            threads = [t for ts in asked.values() for t in ts]

            def settled(s: FakeSlack) -> bool:
                return all(answer_id(s, "C1", t) or _pointed(s, t) for t in threads)
            slack.wait_for(settled)
            for link, ts in asked.items():
                answered = [t for t in ts if answer_id(slack, "C1", t)]
                assert len(answered) == 1, (link, answered)
                assert all(_pointed(slack, t) for t in ts if t not in answered)

            # a digest run both bots were up for: one posts it, the other finds it posted
            shared = _run_of_both(a, b, both_up, timeout=WAIT)
            assert shared is not None, (a.stderr()[-2000:], b.stderr()[-2000:])

            # kill -9 bot a while it runs 4 analyses: bot b takes them over within the lease
            slow = {k: _report(srv, www, k, 900) for k in range(11, 15)}  # held until a is killed
            killed = [a.event(message_event("C2", DEV, f"failed: <{link}|r>"))["event"]["ts"]
                      for link in slow.values()]
            paths = {f"/reports/{k}" for k in slow}
            slack.wait_for(lambda s: {r.path for r in srv.seen("/reports/")} >= paths)
            a.kill()
            died = time.time()
            for k in range(11, 15):
                _report(srv, www, k, 0)
            slack.wait_for(lambda s: all(answer_id(s, "C2", t) for t in killed))
            answered_after = time.time() - died
            resumed = [c for c in slack.calls_to("chat.update") if c.params.get("channel") == "C2"
                       and "resumed after the bot restarted" in str(c.params)]
            assert len({c.params["ts"] for c in resumed}) == 4
            taken_over = min(c.at for c in resumed) - died
            assert taken_over < LEASE, taken_over
            print(f"kill -9: taken over in {taken_over:.1f} s, 4 answered in {answered_after:.1f} s")
            assert b.terminate()[0] == 0  # a loaded machine takes a while to exit
        finally:
            a.stop()
            b.stop()
        # every run is posted by one bot at most: no run logged as posted twice, and Slack got no
        # more digests than runs were won (a lease per run; kill -9 may cut a run after its post
        # and before its log line)
        posted = _runs(a, POSTED) + _runs(b, POSTED)
        assert posted and len(posted) == len(set(posted)), sorted(posted)
        engine = kbdb.make_engine(postgres_url)
        try:
            with kbdb.session(engine) as s:
                per_job = Counter(d.job_id for d in s.exec(select(DiagnosisRecord)))
                states = Counter(r.state for r in s.exec(select(BotRequest)))
                won = [x.name for x in s.exec(select(Lease)) if x.name.startswith(f"digest:{DIGEST}:")]
        finally:
            engine.dispose()
        assert len(posted) <= len(_digest_posts(slack)) <= len(won), (posted, _digest_posts(slack), won)
        assert per_job == {f"job-00{k:02d}": 1 for k in [*range(1, 9), *range(11, 15)]}, per_job
        assert states == {"done": 12}, states
        for bot in (a, b):
            assert "Traceback" not in bot.stderr().replace("KeyboardInterrupt", ""), bot.stderr()[-3000:]


def _pointed(slack: FakeSlack, thread_ts: str) -> bool:
    """The thread was told the job is already being diagnosed (elsewhere)."""
    return any("already being diagnosed" in str(m.get("text")) for m in slack.thread("C1", thread_ts))
