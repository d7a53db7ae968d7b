"""The bounded worker pool that diagnoses jobs for Slack, over durable requests (kb.requests).

``accept()`` writes the request (a ``bot_request`` row) before Slack is acknowledged: one analysis per
job at a time, at most MAX_QUEUED queued or running. ``announce()`` posts "Diagnosing …" in the thread
and hands the row to a worker; ``request()`` does both. A worker takes the row, runs the analysis
(``bot.analysis_process``: a child process with the L4_ANALYSIS_TIMEOUT budget; ``bot.analysis_dask``: a
task on the Dask cluster of L4_DASK_SCHEDULER), and replaces the
progress message with the summary (shorter forms when Slack refuses the long one) or one line saying
what went wrong. ``resume()`` at start takes over what a stopped or killed bot left: queued rows, and
running rows of a holder that is gone (delivered if stored, re-run, or ended with "ask again" after
MAX_ATTEMPTS). ``drain()`` stops taking rows, lets running analyses finish within a grace period,
and tells the threads of the rest that they resume at the next start.

Several bots may share one database: a job has one active request across all of them (the database
refuses a second; its asker is pointed to the first thread), each bot renews the lease on the rows it
holds every third of L4_LEASE_SECONDS, and on the same beat takes over (``resume``) the rows of a bot
that is gone: its lease ran out, or it was a process of this host that no longer runs.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from sqlalchemy.engine import Engine

from bot import metrics
from bot.analysis_process import (
    Died,
    Failed,
    InlineRunner,
    Outcome,
    ProcessRunner,
    Refused,
    Stopped,
    Stored,
    TimedOut,
    Unreachable,
)
from bot.config import Settings
from bot.plots import diagnosis_pngs
from bot.slack.blocks import error_message, note_message
from bot.slack.client import slack_error
from bot.slack.inflight import InFlight, Where
from bot.slack.mrkdwn import escape
from bot.slack.thread_message import ThreadMessage, error_forms, summary_forms
from bot.slack.uploads import OutFile, upload_files
from bot.sources.netguard import safe_url
from engine.model import Diagnosis, diagnosis_from_dict
from kb import db as kbdb
from kb import diagnoses, requests
from kb.models import BotRequest

log = logging.getLogger(__name__)
MAX_QUEUED = 20  # analyses queued or running at once; more requests are turned away politely
MAX_ATTEMPTS = 3  # analyses started for one request (restarts, crashed analyses) before "ask again"
LEASE_SECONDS = 120.0  # default L4_LEASE_SECONDS: a holder renews its rows' lease this long, every third

Triage = Callable[..., Any]  # like bot.triage.triage


@dataclass(frozen=True)
class Accepted:
    """The job is being diagnosed (request ``request_id``); ``message_ts`` is the progress message
    in the thread once it is posted."""

    ref: str
    where: Where
    request_id: int
    message_ts: str | None = None


@dataclass(frozen=True)
class Busy:
    """Too many analyses are queued; the asker is told to try again later."""

    ref: str
    where: Where


@dataclass(frozen=True)
class AlreadyRunning:
    """Someone asked for this job before and its analysis is still running at ``where``."""

    ref: str
    where: Where
    asked_in: Where | None = None


class Diagnoser:
    def __init__(self, settings: Settings, client: WebClient, *, run_triage: Triage | None = None,
                 inflight: InFlight | None = None, max_queued: int = MAX_QUEUED,
                 engine: Engine | None = None) -> None:
        self.settings = settings
        self.engine = engine if engine is not None else kbdb.open_db(settings.database_url)
        self.client = client
        self.run_triage = run_triage
        # bot.triage runs in a child process with a budget (on the Dask cluster when one is set);
        # an injected triage (tests) in the thread
        self.runner = _runner(settings, self.engine) if run_triage is None else InlineRunner(run_triage,
                                                                                             self.engine)
        self.inflight = inflight or InFlight()
        self.pool = ThreadPoolExecutor(max_workers=self.runner.slots or settings.workers,
                                       thread_name_prefix="l4-diagnose")
        self.max_queued = max_queued
        self.holder = requests.new_holder()
        self.lease_seconds = settings.lease_seconds or LEASE_SECONDS
        self._lock = threading.Lock()
        self._active: dict[int, str] = {}  # request id -> job ref: accepted and not finished here
        self._running: set[int] = set()
        self._futures: set[Future] = set()
        self._stopping = threading.Event()  # draining: take no new row
        self._killing = threading.Event()  # the grace period is over: stop running analyses
        self._heartbeat = threading.Thread(target=self._renew_leases, name="l4-lease", daemon=True)
        self._heartbeat.start()

    # -- accepting ---------------------------------------------------------------------------------
    def accept(self, ref: str, channel: str, thread_ts: str, user: str | None = None
               ) -> Accepted | AlreadyRunning | Busy:
        """Record a request for ``ref`` answering in ``channel``/``thread_ts`` (see the module doc)."""
        where = Where(channel, thread_ts)
        with self._lock:
            running = self.inflight.claim(ref, where)
            if running is not None:
                metrics.REQUESTS.labels("already_running").inc()
                return AlreadyRunning(ref, running, where)
            if len(self._active) >= self.max_queued:
                self.inflight.release(ref)
                metrics.REQUESTS.labels("busy").inc()
                return Busy(ref, where)
            try:
                with kbdb.session(self.engine) as s:
                    row = requests.add(s, ref, channel, thread_ts, user, self.holder, self.lease_seconds)
                    s.commit()
            except requests.JobActive as exc:  # another bot on the database has this job
                self.inflight.release(ref)
                metrics.REQUESTS.labels("already_running").inc()
                return AlreadyRunning(ref, Where(exc.row.channel, exc.row.thread_ts), where)
            except BaseException:
                self.inflight.release(ref)
                raise
            assert row.id is not None
            self._active[row.id] = ref
        metrics.REQUESTS.labels("accepted").inc()
        return Accepted(ref, where, row.id)

    def announce(self, outcome: Accepted | AlreadyRunning | Busy, user: str | None = None
                 ) -> Accepted | AlreadyRunning | Busy:
        """Tell the thread what ``accept`` decided; hand an accepted request to a worker."""
        if isinstance(outcome, AlreadyRunning):
            self._point_to(outcome.ref, outcome.where, outcome.asked_in or outcome.where, user)
            return outcome
        if isinstance(outcome, Busy):
            with self._lock:
                queued = len(self._active)
            text, blocks = error_message(outcome.ref, f"I am busy with {queued} analyses; ask again in a "
                                                      "few minutes")
            self._note(outcome.where, text, blocks)
            return outcome
        message = self._message(outcome.request_id, outcome.ref, outcome.where, None)
        ts = message.post("queued")  # None: Slack is unreachable now; the worker posts it
        self._submit(outcome.request_id)
        return Accepted(outcome.ref, outcome.where, outcome.request_id, ts)

    def request(self, ref: str, channel: str, thread_ts: str, user: str | None = None
                ) -> Accepted | AlreadyRunning | Busy:
        """``accept`` then ``announce``."""
        return self.announce(self.accept(ref, channel, thread_ts, user), user)

    def resume(self) -> int:
        """Take over the requests a stopped or killed bot left unfinished (at start, and on every
        lease beat for the bots on the same database that died); returns how many."""
        taken = 0
        with kbdb.session(self.engine) as s:
            rows = requests.active(s)
        for row in rows:
            if self._stopping.is_set():
                break
            if not requests.holder_gone(row, self.holder):
                continue  # this bot, or another one that is alive, has it
            assert row.id is not None
            with self._lock:
                if row.id in self._active or len(self._active) >= self.max_queued:
                    continue
                with kbdb.session(self.engine) as s:
                    adopted = requests.adopt(s, row, self.holder, self.lease_seconds)
                    s.commit()
                if not adopted:
                    continue  # another bot took it over first
                if row.holder is not None:
                    metrics.TAKEOVERS.inc()
                self._active[row.id] = row.job_ref
                self.inflight.claim(row.job_ref, Where(row.channel, row.thread_ts))
            self._submit(row.id, resumed=True)
            taken += 1
        if taken:
            log.info("resuming %d request(s) left unfinished", taken)
        return taken

    def _submit(self, request_id: int, resumed: bool = False) -> None:
        try:
            future = self.pool.submit(self._work, request_id, resumed)
        except RuntimeError:  # the pool is shut down: the bot is stopping; the row stays queued
            log.info("request %s stays queued for the next start", request_id)
            return
        with self._lock:
            self._futures.add(future)
        future.add_done_callback(self._forget)

    def _forget(self, future: Future) -> None:
        with self._lock:
            self._futures.discard(future)

    def queue_depth(self) -> int:
        """Requests this bot has accepted or taken over and not finished."""
        with self._lock:
            return len(self._active)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until no analysis is queued or running (for tests and shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._futures:
                    return True
            time.sleep(0.02)
        return False

    # -- stopping ------------------------------------------------------------------------------------
    def drain(self, grace: float) -> int:
        """Take no new request, give running analyses ``grace`` seconds, stop the rest and tell
        their threads they resume at the next start. Returns how many were left unfinished."""
        self._stopping.set()
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            with self._lock:
                if not self._running:
                    break
            time.sleep(0.05)
        self._killing.set()  # what still runs is stopped now and put back in the queue
        self.pool.shutdown(wait=self.runner.budgeted, cancel_futures=True)
        try:
            with kbdb.session(self.engine) as s:
                requests.release_all(s, self.holder)  # another bot on the database may take them now
                s.commit()
        except Exception:  # noqa: BLE001 - they are taken over once the lease runs out
            log.warning("cannot release the queued requests", exc_info=True)
        self.runner.close()
        with self._lock:
            left = dict(self._active)
            self._active.clear()
        if not left:
            return 0
        with kbdb.session(self.engine) as s:
            rows = [r for r in requests.active(s) if r.id in left]
        for row in rows:
            where = Where(row.channel, row.thread_ts)
            message = self._message(row.id or 0, row.job_ref, where, row.message_ts)
            message.step("paused: the bot is restarting; this analysis resumes when it is back")
        return len(left)

    def shutdown(self, wait: bool = True) -> None:
        """Stop the pool: with ``wait``, after every accepted analysis ran; else ``drain(0)``."""
        if wait:
            self.pool.shutdown(wait=True)
            self._stopping.set()
            self._killing.set()  # ends the lease heartbeat
            self.runner.close()
            return
        self.drain(0)

    # -- the work ----------------------------------------------------------------------------------
    def _message(self, request_id: int, ref: str, where: Where, ts: str | None) -> ThreadMessage:
        def record(new_ts: str) -> None:
            with kbdb.session(self.engine) as s:
                requests.set_message(s, request_id, new_ts)
                s.commit()
        return ThreadMessage(self.client, where.channel, where.thread_ts, ref, ts, on_posted=record,
                             give_up=self._killing)

    def _work(self, request_id: int, resumed: bool) -> None:
        if self._stopping.is_set():
            return  # left queued: the next start resumes it
        ref = None
        try:
            with kbdb.session(self.engine) as s:
                row = requests.get(s, request_id)
            ref = row.job_ref
            self._handle(row, resumed)
        except Exception:  # noqa: BLE001 - a bug here must not strand the other requests
            log.exception("request %s (%s) failed", request_id, _shown(ref or "?"))
        finally:
            with self._lock:
                self._running.discard(request_id)
                if not self._stopping.is_set() or ref is None:
                    self._active.pop(request_id, None)
                    if ref is not None:
                        self.inflight.release(ref)

    def _handle(self, row: BotRequest, resumed: bool, retry_note: str | None = None) -> None:
        assert row.id is not None
        where = Where(row.channel, row.thread_ts)
        message = self._message(row.id, row.job_ref, where, row.message_ts)
        if row.state == "running":  # cut off while its holder ran it
            if row.diagnosis_id is not None:
                self._deliver(row.id, message, row.diagnosis_id)
                return
            if row.final_text is not None:
                self._end(row.id, message, "failed", row.final_text)
                return
            if row.attempts >= MAX_ATTEMPTS:
                self._end(row.id, message, "abandoned", f"could not finish after {row.attempts} attempts "
                          "(the bot stopped or the analysis crashed each time); ask again")
                return
            with kbdb.session(self.engine) as s:
                requests.requeue(s, row.id, self.holder, self.lease_seconds)
                s.commit()
        with kbdb.session(self.engine) as s:
            taken = requests.take(s, row.id, self.holder, self.lease_seconds)
            s.commit()
        if taken is None:
            return  # another worker has it, or it is finished
        with self._lock:
            self._running.add(row.id)
        message.post()
        if retry_note or resumed or taken.attempts > 1:
            why = retry_note or "resumed after the bot restarted"
            message.step(f"{why} (attempt {taken.attempts} of {MAX_ATTEMPTS})")
        started = time.monotonic()
        outcome = self._analyse(taken, message)
        metrics.ANALYSIS_SECONDS.observe(time.monotonic() - started)
        metrics.count_outcome(outcome)
        self._conclude(taken, message, outcome)

    def _analyse(self, row: BotRequest, message: ThreadMessage) -> Outcome:
        fields = {"job": row.job_ref, "database_url": self.settings.database_url,
                  "requested_at": row.created_at, "slack_channel": row.channel,
                  "slack_thread_ts": row.thread_ts, "settings": self.settings, "local_paths": False,
                  "bot_request_id": row.id}  # a bot.triage.TriageRequest's
        return self.runner.run(fields, self.settings.analysis_timeout, message, self._killing)

    def _conclude(self, row: BotRequest, message: ThreadMessage, outcome: Outcome) -> None:
        assert row.id is not None
        with kbdb.session(self.engine) as s:
            stored = requests.get(s, row.id).diagnosis_id
        if stored is None and isinstance(outcome, Stored):
            stored = outcome.diagnosis_id  # a triage that did not record it on the request
        if stored is not None:  # stored, even if the answer was lost on the way (a kill at the end)
            self._deliver(row.id, message, stored)
            return
        if isinstance(outcome, Stopped):
            with kbdb.session(self.engine) as s:
                requests.requeue(s, row.id)
                s.commit()
            return  # drain() tells the thread
        if isinstance(outcome, Unreachable):  # the cluster is gone: kept queued for the next start
            with kbdb.session(self.engine) as s:
                requests.requeue(s, row.id)
                s.commit()
            message.final(error_forms(message.label, f"{outcome.reason}; the request is kept and resumes "
                                                     "when the bot restarts, or ask again"))
            return
        if isinstance(outcome, Refused):
            self._end(row.id, message, "failed", outcome.reason)
        elif isinstance(outcome, TimedOut):
            self._end(row.id, message, "failed",
                      f"stopped after {outcome.seconds:g} s: the job's logs are too large or unusual for the "
                      f"bot; try `l4 diagnose {_shown(row.job_ref)}` on a bigger machine")
        elif isinstance(outcome, Failed):
            self._end(row.id, message, "failed",
                      f"internal error ({outcome.kind}); the bot's log has the details")
        elif isinstance(outcome, Died):
            if row.attempts < MAX_ATTEMPTS:
                log.warning("the analysis of %s died (%s); trying again", _shown(row.job_ref), outcome.reason)
                with kbdb.session(self.engine) as s:
                    requests.requeue(s, row.id, self.holder, self.lease_seconds)
                    s.commit()
                with self._lock:
                    self._running.discard(row.id)
                self._handle(requests_get(self.engine, row.id), resumed=False,
                             retry_note=f"the analysis process died ({outcome.reason}); trying again")
            else:
                self._end(row.id, message, "abandoned",
                          f"could not finish after {row.attempts} attempts (the analysis process died: "
                          f"{outcome.reason}); ask again")

    def _deliver(self, request_id: int, message: ThreadMessage, diagnosis_id: int) -> None:
        with kbdb.session(self.engine) as s:
            diagnosis = diagnosis_from_dict(diagnoses.as_dict(diagnoses.get(s, diagnosis_id)))
        if message.final(summary_forms(diagnosis, diagnosis_id)):
            with kbdb.session(self.engine) as s:
                requests.finish(s, request_id, "done")
                s.commit()
            self._attach_plots(message, diagnosis)
        # else: left running with its diagnosis; the next start delivers it

    def _end(self, request_id: int, message: ThreadMessage, state: str, reason: str) -> None:
        with kbdb.session(self.engine) as s:
            requests.set_final_text(s, request_id, reason)
            s.commit()
        if message.final(error_forms(message.label, reason)):
            with kbdb.session(self.engine) as s:
                requests.finish(s, request_id, state)
                s.commit()

    def _renew_leases(self) -> None:
        while not self._killing.wait(self.lease_seconds / 3):
            try:
                with kbdb.session(self.engine) as s:
                    requests.renew(s, self.holder, self.lease_seconds)
                    s.commit()
            except Exception:  # noqa: BLE001 - the next beat tries again
                metrics.ERRORS.labels("database").inc()
                log.warning("cannot renew the leases of the running requests", exc_info=True)
                continue
            if self._stopping.is_set():
                continue
            try:
                self.resume()  # what a bot on the same database that died left
            except Exception:  # noqa: BLE001 - the next beat tries again
                log.warning("cannot look for requests left by a stopped bot", exc_info=True)

    # -- notes in threads ------------------------------------------------------------------------------
    def _note(self, where: Where, text: str, blocks: list) -> None:
        try:
            self.client.chat_postMessage(channel=where.channel, thread_ts=where.thread_ts, text=text,
                                         blocks=blocks)
        except Exception as exc:  # noqa: BLE001 - a note is best effort
            metrics.ERRORS.labels("slack").inc()
            log.warning("cannot post a note in %s: %s", where, slack_error(exc))

    def _point_to(self, ref: str, running: Where, asked_in: Where, user: str | None) -> None:
        link = self._permalink(running)
        whom = f"<@{user}> " if user else ""
        where = f"<{link}|this thread>" if link else f"the thread in <#{running.channel}>"
        same = running == asked_in
        text = (f"{whom}*{escape(ref)}* is already being diagnosed"
                + (" here; the summary will replace the progress message above." if same
                   else f"; follow {where} for the result."))
        t, blocks = note_message(text)
        self._note(asked_in, t, blocks)

    def _permalink(self, where: Where) -> str | None:
        try:
            link = self.client.chat_getPermalink(channel=where.channel, message_ts=where.thread_ts)
            value = link.get("permalink")
            return str(value) if value else None
        except Exception:  # noqa: BLE001 - the pointer then names the channel
            return None

    def _attach_plots(self, message: ThreadMessage, diagnosis: Diagnosis) -> None:
        """The diagnosis' plots (node scores, iterations, node × event heat map) into the thread."""
        try:
            files = [OutFile(name, png, name.rsplit(".", 1)[0].replace("-", " "))
                     for name, png in diagnosis_pngs(diagnosis)]
            upload_files(self.client, message.channel, message.thread_ts, files)
        except (SlackApiError, SlackClientError) as exc:  # plots are a bonus; the summary is posted
            log.warning("cannot attach the plots of %s: %s", _shown(message.label), slack_error(exc))
        except Exception:  # noqa: BLE001 - a plotting bug must not look like a failed diagnosis
            log.exception("plots of %s failed", _shown(message.label))


def _runner(settings: Settings, engine: Engine) -> Any:
    """The analyses' runner: on the Dask cluster when L4_DASK_SCHEDULER is set (bot.analysis_dask:
    L4_DASK_MAX_ANALYSES threads waiting on futures), else child processes on this machine."""
    if not settings.dask_scheduler:
        return ProcessRunner()
    from bot.analysis_dask import DaskRunner

    return DaskRunner(settings, engine)


def requests_get(engine: Engine, request_id: int) -> BotRequest:
    with kbdb.session(engine) as s:
        return requests.get(s, request_id)


def _shown(ref: str) -> str:
    """``ref`` fit for the bot's log: a link without credentials or query string (bot.sources)."""
    return safe_url(ref) if "://" in ref else ref
