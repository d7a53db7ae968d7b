"""The scheduled digest: APScheduler 3 ``BackgroundScheduler`` with its job store in the knowledge
base's database, so the job (and when it next runs) survives a restart of the bot.

One job, id ``l4-digest``, runs ``bot.scheduler:run_digest`` (referenced by text, so a restarted
process finds it) on the cron expression ``L4_DIGEST_CRON`` (UTC, default Mondays 09:00; a sixth
field in front gives seconds) and posts to ``L4_DIGEST_CHANNEL``. Runs that were missed while the
bot was down are coalesced into one, if they are less than ``MISFIRE_GRACE_SECONDS`` late; never
two runs at once in one process.
On start a stored job with the same schedule is left as it is (so its overdue run happens); a
changed schedule or channel replaces it, keeping an overdue run that is still within the grace.
Only the channel and the number of days are stored with the job, never a token or a URL.

Several bots on one database each run the job (APScheduler does not coordinate its schedulers):
every run first takes the lease ``digest:<channel>:<run time>`` (kb.leases), the run time being the
trigger's latest fire time, so exactly one bot posts each scheduled run; the lease is kept past the
misfire grace, so a bot that starts later and makes up the same run posts nothing.
"""
from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger

from bot import metrics
from bot.config import ConfigError, Settings

DIGEST_JOB_ID = "l4-digest"
JOB_FUNC = "bot.scheduler:run_digest"
JOBS_TABLE = "apscheduler_jobs"
MISFIRE_GRACE_SECONDS = 6 * 3600
DIGEST_DAYS = 7
LEASE_PREFIX = "digest:"
_SLOT_WINDOWS = (120, 3600)  # seconds looked back for the run time, before the whole grace

log = logging.getLogger("l4.digest")

# What the running process gave start_digest_scheduler: the job reads it at run time. After a
# restart it is set again by the next start; without it the job builds both from the environment.
_runtime: dict[str, Any] = {}
_runtime_lock = threading.Lock()


def cron_trigger(expr: str) -> CronTrigger:
    """A UTC trigger from a cron expression: five fields (minute hour day month weekday), or six with
    the second first (second minute hour day month weekday: ``*/10 * * * * *`` fires every ten
    seconds, on the wall clock, so every bot on one database has the same run times). Raises
    ConfigError (one line)."""
    text = " ".join((expr or "").split())
    fields = text.split(" ")
    if len(fields) not in (5, 6):
        raise ConfigError("L4_DIGEST_CRON must have 5 fields (minute hour day month weekday) or 6 "
                          f"(second minute hour day month weekday), got {text[:60]!r}")
    try:
        if len(fields) == 5:  # as before seconds were allowed: a stored job's trigger stays the same
            return CronTrigger.from_crontab(text, timezone="UTC")
        second, minute, hour, day, month, weekday = fields
        return CronTrigger(second=second, minute=minute, hour=hour, day=day, month=month,
                           day_of_week=weekday, timezone="UTC")
    except ValueError as exc:
        raise ConfigError(f"L4_DIGEST_CRON {text[:60]!r} is not a valid cron expression: "
                          f"{str(exc).splitlines()[0][:120]}") from None


def web_client(settings: Settings) -> Any:
    """The Slack client for the digest (the bot's own: SLACK_API_URL, retries)."""
    from bot.slack.client import make_web_client

    return make_web_client(settings)


def build_scheduler(settings: Settings) -> BackgroundScheduler:
    """A (not yet started) scheduler whose jobs live in the knowledge base's database."""
    from kb.db import database_url, make_engine

    store = SQLAlchemyJobStore(engine=make_engine(database_url(settings.database_url)), tablename=JOBS_TABLE)
    return BackgroundScheduler(
        jobstores={"default": store}, timezone="UTC",
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": MISFIRE_GRACE_SECONDS})


def start_digest_scheduler(settings: Settings, client: Any = None, *, trigger: BaseTrigger | None = None,
                           days: int = DIGEST_DAYS) -> BackgroundScheduler | None:
    """Start the scheduler with the digest job. None when ``L4_DIGEST_CHANNEL`` is not set.

    A stored job with the same trigger, channel and days is kept as it is, so a run that was due
    while the bot was down happens once now (within ``MISFIRE_GRACE_SECONDS``). A changed cron or
    channel replaces it; its stored next run is kept when that is overdue but within the grace.
    ``client`` (a WebClient) is used by the job while this process runs; ``trigger`` overrides the
    cron expression (tests)."""
    if not settings.digest_channel:
        return None
    trigger = trigger or cron_trigger(settings.digest_cron)
    with _runtime_lock:
        _runtime.update(settings=settings, client=client, trigger=trigger)
    scheduler = build_scheduler(settings)
    scheduler.start(paused=True)  # the job store is open, nothing runs until resume()
    try:
        _ensure_digest_job(scheduler, trigger, {"channel": settings.digest_channel, "days": days})
    except BaseException:
        scheduler.shutdown(wait=False)
        raise
    scheduler.resume()
    job = scheduler.get_job(DIGEST_JOB_ID)
    log.info("digest scheduled for %s, next run %s", settings.digest_channel,
             job.next_run_time if job else "never")
    return scheduler


def _job_spec(func_ref: str, trigger: BaseTrigger, kwargs: dict[str, Any], grace: int | None) -> tuple:
    """What makes two digest jobs the same (a trigger's repr holds its fields, dates and zone)."""
    return func_ref, type(trigger).__name__, repr(trigger), sorted(kwargs.items()), grace


def _ensure_digest_job(scheduler: BackgroundScheduler, trigger: BaseTrigger, kwargs: dict[str, Any]) -> None:
    """Add the digest job to a started (paused) scheduler, keeping a stored one's overdue run."""
    try:
        stored = scheduler.get_job(DIGEST_JOB_ID)
    except Exception as exc:  # noqa: BLE001 - an unreadable stored job is replaced, not fatal
        log.warning("stored digest job unreadable, replacing it: %s", exc.__class__.__name__)
        scheduler.remove_job(DIGEST_JOB_ID)
        stored = None
    wanted = _job_spec(JOB_FUNC, trigger, kwargs, MISFIRE_GRACE_SECONDS)
    if stored is not None and _job_spec(stored.func_ref, stored.trigger, stored.kwargs,
                                        stored.misfire_grace_time) == wanted:
        return  # unchanged: APScheduler runs an overdue run once on resume, within the grace
    keep: dict[str, Any] = {}
    due = getattr(stored, "next_run_time", None)
    if due is not None:
        late = (datetime.now(UTC) - due).total_seconds()
        if 0 < late <= MISFIRE_GRACE_SECONDS:
            keep["next_run_time"] = due  # the missed run still happens once, then the new schedule
    scheduler.add_job(JOB_FUNC, trigger=trigger, id=DIGEST_JOB_ID, name="L4 recurring-fault digest",
                      kwargs=kwargs, replace_existing=True, **keep)


def run_digest(channel: str, days: int = DIGEST_DAYS) -> str | None:
    """The scheduled job: compute the digest and post it to ``channel``. Returns the message ts, or
    None when it failed (the failure is logged in one line, never with a token)."""
    from bot.digest_blocks import post_digest
    from kb import leases
    from kb.db import open_db, session
    from kb.digest import compute_digest
    from kb.requests import new_holder

    with _runtime_lock:
        settings = _runtime.get("settings")
        client = _runtime.get("client")
        trigger = _runtime.get("trigger")
    engine = None
    lease = holder = None
    try:
        settings = settings or Settings.from_env()
        engine = open_db(settings.database_url)
        now = datetime.now(UTC)
        slot = run_time(trigger or cron_trigger(settings.digest_cron), now)
        lease, holder = f"{LEASE_PREFIX}{channel}:{slot.isoformat()}", new_holder()
        with session(engine) as s:
            leases.purge(s, LEASE_PREFIX, now)
            won = leases.acquire(s, lease, holder, MISFIRE_GRACE_SECONDS + 3600)
            s.commit()
        if not won:
            log.info("digest run of %s for %s: posted by another bot", slot.isoformat(), channel)
            metrics.DIGESTS.labels("other_bot").inc()
            return None
        client = client or web_client(settings)
        with session(engine) as s:
            dg = compute_digest(s, days=days)
        ts = post_digest(client, channel, dg)
        log.info("digest run of %s (%d days) posted to %s", slot.isoformat(), days, channel)
        metrics.DIGESTS.labels("posted").inc()
        return ts
    except Exception as exc:  # noqa: BLE001 - a scheduled job must not die with a trace in the log
        log.error("digest for %s failed: %s: %s", channel, exc.__class__.__name__,
                  (str(exc).splitlines() or [""])[0][:300])
        metrics.DIGESTS.labels("failed").inc()
        metrics.ERRORS.labels("digest").inc()
        _let_go(engine, lease, holder)  # not posted: a run made up later (or by hand) may post it
        return None
    finally:
        if engine is not None:
            engine.dispose()


def run_time(trigger: BaseTrigger, now: datetime) -> datetime:
    """The run a job started at ``now`` is for: the trigger's latest fire time up to ``now`` (within
    the misfire grace); ``now`` to the minute when there is none (a run kept from a changed schedule)."""
    for window in (*_SLOT_WINDOWS, MISFIRE_GRACE_SECONDS):
        last = None
        fire = trigger.get_next_fire_time(None, now - timedelta(seconds=window))
        while fire is not None and fire <= now:
            last = fire
            fire = trigger.get_next_fire_time(fire, fire + timedelta(microseconds=1))
        if last is not None:
            return last.astimezone(UTC)
    return now.replace(second=0, microsecond=0)


def _let_go(engine: Any, lease: str | None, holder: str | None) -> None:
    if engine is None or lease is None or holder is None:
        return
    from kb import leases
    from kb.db import session

    try:
        with session(engine) as s:
            leases.release(s, lease, holder)
            s.commit()
    except Exception:  # noqa: BLE001 - it expires on its own
        log.warning("cannot release the digest lease %s", lease)
