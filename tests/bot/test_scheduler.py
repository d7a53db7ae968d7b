"""The scheduled digest: cron validation, a run on a short interval that posts to the fake Slack,
the job surviving a restart (a new process with a new scheduler on the same SQLite file), and a
run missed while the bot was down made up once on start (same or changed schedule)."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.job import Job
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from bot import scheduler as sched
from bot.config import ConfigError, Settings
from kb.db import database_url, make_engine
from tests.helpers import digest_seed
from tests.helpers.fake_slack import FakeSlack
from tests.helpers.wait import WAIT

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def db_url(tmp_path):
    return digest_seed.seeded_database(tmp_path / "kb.db")


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _fresh_runtime():
    sched._runtime.clear()
    yield
    sched._runtime.clear()


def _settings(db_url: str, slack: FakeSlack, **kw) -> Settings:
    return Settings(slack_bot_token="xoxb-test", slack_api_url=slack.api_url, database_url=db_url,
                    digest_channel="C0DIGEST", **kw)


def test_cron_default_is_monday_nine_utc_and_bad_cron_is_one_line() -> None:
    trig = sched.cron_trigger(Settings().digest_cron)
    after = datetime(2026, 6, 16, 10, 0, tzinfo=UTC)  # a Tuesday
    assert trig.get_next_fire_time(None, after) == datetime(2026, 6, 22, 9, 0, tzinfo=UTC)
    for bad in ("61 9 * * mon", "0 9 * *", "every monday", "0 9 * * mon 2026", ""):
        with pytest.raises(ConfigError) as e:
            sched.cron_trigger(bad)
        assert "L4_DIGEST_CRON" in str(e.value) and "\n" not in str(e.value)


def test_cron_with_seconds_fires_on_the_wall_clock() -> None:
    """Six fields put the second first: every bot computes the same run times, and a run's slot
    (the lease name) is the trigger's latest fire time to the second."""
    trig = sched.cron_trigger("*/10 * * * * *")
    at = datetime(2026, 6, 16, 10, 0, 3, tzinfo=UTC)
    assert trig.get_next_fire_time(None, at) == datetime(2026, 6, 16, 10, 0, 10, tzinfo=UTC)
    assert sched.run_time(trig, datetime(2026, 6, 16, 10, 0, 17, tzinfo=UTC)) == at.replace(second=10)
    monday = sched.cron_trigger("30 0 9 * * mon")
    assert monday.get_next_fire_time(None, at) == datetime(2026, 6, 22, 9, 0, 30, tzinfo=UTC)
    # five fields are as before: the trigger of a stored job is unchanged, so it is kept
    assert repr(sched.cron_trigger("0 9 * * mon")) == repr(CronTrigger.from_crontab("0 9 * * mon", "UTC"))
    for bad in ("61 * * * * *", "* * * * * * *", "*/10 * * * * someday"):
        with pytest.raises(ConfigError) as e:
            sched.cron_trigger(bad)
        assert "L4_DIGEST_CRON" in str(e.value) and "\n" not in str(e.value)


def test_no_channel_no_scheduler(db_url) -> None:
    assert sched.start_digest_scheduler(Settings(database_url=db_url)) is None


def test_scheduled_digest_posts_and_survives_a_restart(db_url, slack, tmp_path) -> None:
    settings = _settings(db_url, slack)
    client = sched.web_client(settings)
    first = sched.start_digest_scheduler(settings, client, trigger=IntervalTrigger(seconds=1))
    try:
        job = first.get_job(sched.DIGEST_JOB_ID)
        assert job.func_ref == sched.JOB_FUNC and job.coalesce and job.max_instances == 1
        assert job.misfire_grace_time == sched.MISFIRE_GRACE_SECONDS
        assert job.kwargs == {"channel": "C0DIGEST", "days": 7}  # no token, no URL in the store
        # starting again (a restart of the bot) replaces the stored job instead of adding one
        first.shutdown(wait=True)
        first = sched.start_digest_scheduler(settings, client, trigger=IntervalTrigger(seconds=1))
        assert [j.id for j in first.get_jobs()] == [sched.DIGEST_JOB_ID]
        posts = slack.wait_for_call("chat.postMessage")
        slack.wait_for_call("files.completeUploadExternal")
        assert posts[0].params["channel"] == "C0DIGEST"
        assert any("GPU has fallen off the bus" in t for t in slack.texts())
        (up,) = [u for u in slack.uploads.values() if u.completed][:1]
        assert up.thread_ts and up.content.startswith(b"\x89PNG")
    finally:
        first.shutdown(wait=True)
    done = len(slack.calls_to("chat.postMessage"))

    # a new process: a bare scheduler on the same database, nothing added; the stored job runs and
    # builds its Slack client from the environment
    env = {**os.environ, "L4_DATABASE_URL": db_url, "SLACK_BOT_TOKEN": "xoxb-test",
           "SLACK_API_URL": slack.api_url, "PYTHONPATH": str(REPO)}
    env.pop("L4_DIGEST_CHANNEL", None)
    script = ("import time, logging; logging.basicConfig(level=logging.INFO)\n"
              "from bot.config import Settings; from bot.scheduler import build_scheduler, DIGEST_JOB_ID\n"
              "s = build_scheduler(Settings.from_env()); s.start()\n"
              "print('job', s.get_job(DIGEST_JOB_ID).func_ref, flush=True)\n"
              "time.sleep(3600)\n")  # killed once it posted
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        slack.wait_for_call("chat.postMessage", count=done + 1)
    finally:
        proc.kill()
        out, err = proc.communicate(timeout=WAIT)
    assert f"job {sched.JOB_FUNC}" in out
    assert "xoxb" not in err


def test_failed_run_logs_one_line_without_token(db_url, slack, caplog) -> None:
    settings = _settings(db_url, slack)
    sched._runtime.update(settings=settings, client=sched.web_client(settings))
    slack.fail_next("chat.postMessage", status=200, error="channel_not_found", retry_after=None)
    with caplog.at_level(logging.ERROR, logger="l4.digest"):
        assert sched.run_digest("C0GONE") is None
    (rec,) = caplog.records
    msg = rec.getMessage()
    assert "digest for C0GONE failed: SlackApiError" in msg and "\n" not in msg and "xoxb" not in msg
    assert sched.run_digest("C0DIGEST")  # the next run works


# ---- a run missed while the bot was down -----------------------------------------------------------

MONDAY_NINE = "0 9 * * mon"


@contextmanager
def _job_store(settings: Settings) -> Iterator[tuple[SQLAlchemyJobStore, BackgroundScheduler]]:
    """The digest's SQLite job store, opened without a running scheduler (no thread that could run
    or advance the job), and the bare scheduler its jobs belong to."""
    bare = sched.build_scheduler(settings)
    store = SQLAlchemyJobStore(engine=make_engine(database_url(settings.database_url)),
                               tablename=sched.JOBS_TABLE)
    store.start(bare, "default")
    try:
        yield store, bare
    finally:
        store.shutdown()


def _store_overdue_job(settings: Settings, cron: str, late: timedelta, channel: str = "C0DIGEST") -> datetime:
    """What a bot that stopped before the run leaves behind: the digest job in the SQLite job store,
    its next run ``late`` in the past. Returns that run time."""
    due = (datetime.now(UTC) - late).replace(microsecond=0)
    with _job_store(settings) as (store, bare):
        store.add_job(Job(bare, id=sched.DIGEST_JOB_ID, func=sched.JOB_FUNC, trigger=sched.cron_trigger(cron),
                          executor="default", args=(), kwargs={"channel": channel, "days": 7},
                          name="L4 recurring-fault digest", misfire_grace_time=sched.MISFIRE_GRACE_SECONDS,
                          coalesce=True, max_instances=1, next_run_time=due))
    return due


def _posts_after_start(settings: Settings, slack: FakeSlack, expect: int) -> tuple[int, datetime | None]:
    """Start the digest scheduler as the bot does, wait for ``expect`` posts and a bit longer (a
    second run would show); return the number of posts and the job's next run time."""
    scheduler = sched.start_digest_scheduler(settings, sched.web_client(settings))
    try:
        if expect:
            slack.wait_for_call("chat.postMessage", count=expect)
        time.sleep(1.5)
        job = scheduler.get_job(sched.DIGEST_JOB_ID)
        return len(slack.calls_to("chat.postMessage")), job.next_run_time
    finally:
        scheduler.shutdown(wait=True)


def _next_cron(cron: str) -> datetime:
    return sched.cron_trigger(cron).get_next_fire_time(None, datetime.now(UTC))


def test_missed_run_with_the_same_schedule_posts_once_on_start(db_url, slack) -> None:
    settings = _settings(db_url, slack, digest_cron=MONDAY_NINE)
    _store_overdue_job(settings, MONDAY_NINE, timedelta(minutes=30))  # restarted at 09:30
    posts, next_run = _posts_after_start(settings, slack, expect=1)
    assert posts == 1
    assert slack.calls_to("chat.postMessage")[0].params["channel"] == "C0DIGEST"
    assert next_run == _next_cron(MONDAY_NINE)  # then back on the weekly schedule


def test_missed_run_later_than_the_grace_is_skipped(db_url, slack, monkeypatch) -> None:
    monkeypatch.setattr(sched, "MISFIRE_GRACE_SECONDS", 60)
    settings = _settings(db_url, slack, digest_cron=MONDAY_NINE)
    _store_overdue_job(settings, MONDAY_NINE, timedelta(minutes=5))
    posts, next_run = _posts_after_start(settings, slack, expect=0)
    assert posts == 0 and next_run == _next_cron(MONDAY_NINE)


def test_changed_cron_reschedules_and_keeps_a_missed_run_within_the_grace(db_url, slack) -> None:
    settings = _settings(db_url, slack, digest_cron="30 6 * * *")
    _store_overdue_job(settings, MONDAY_NINE, timedelta(minutes=3), channel="C0OLD")
    posts, next_run = _posts_after_start(settings, slack, expect=1)
    assert posts == 1
    assert slack.calls_to("chat.postMessage")[0].params["channel"] == "C0DIGEST"  # the new channel
    assert next_run == _next_cron("30 6 * * *")
    with _job_store(settings) as (store, _):  # what is stored now: the new cron and channel
        (job,) = store.get_all_jobs()
    assert job.id == sched.DIGEST_JOB_ID and str(job.trigger) == str(sched.cron_trigger("30 6 * * *"))
    assert job.kwargs == {"channel": "C0DIGEST", "days": 7}


def test_changed_cron_without_a_missed_run_is_rescheduled_without_running(db_url, slack,
                                                                          monkeypatch) -> None:
    monkeypatch.setattr(sched, "MISFIRE_GRACE_SECONDS", 60)
    settings = _settings(db_url, slack, digest_cron="30 6 * * *")
    _store_overdue_job(settings, MONDAY_NINE, timedelta(minutes=5))  # later than the grace
    posts, next_run = _posts_after_start(settings, slack, expect=0)
    assert posts == 0 and next_run == _next_cron("30 6 * * *")
