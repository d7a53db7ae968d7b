"""The bounded worker pool that diagnoses jobs for Slack and keeps the thread up to date.

``request()`` returns at once: it claims the job (one analysis per job at a time), posts
"Diagnosing …" in the thread and queues the triage. The worker updates that message with the
phase and files parsed, then replaces it with the summary, or with one line saying what went wrong.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from sqlalchemy.engine import Engine

from bot.config import ConfigError, Settings
from bot.plots import diagnosis_pngs
from bot.slack.blocks import error_message, note_message, progress_message, summary_message
from bot.slack.client import slack_error
from bot.slack.inflight import InFlight, Where
from bot.slack.mrkdwn import escape
from bot.slack.uploads import OutFile, upload_files
from bot.sources.netguard import safe_url
from bot.triage import TriageRequest, TriageResult, triage
from engine.ingest import JobError
from engine.model import Diagnosis
from kb import KbError

log = logging.getLogger(__name__)
UPDATE_EVERY_SECONDS = 2.0  # chat.update is rate limited (Tier 3): at most one progress edit per this
MAX_QUEUED = 20  # analyses queued or running at once; more requests are turned away politely

Triage = Callable[..., TriageResult]


@dataclass(frozen=True)
class Accepted:
    """The job is being diagnosed; ``message_ts`` is the progress message in the thread."""

    ref: str
    where: Where
    message_ts: str


@dataclass(frozen=True)
class Busy:
    """Too many analyses are queued; the asker was told to try again later."""

    ref: str
    where: Where


@dataclass(frozen=True)
class AlreadyRunning:
    """Someone asked for this job before and its analysis is still running at ``where``."""

    ref: str
    where: Where


class Diagnoser:
    def __init__(self, settings: Settings, client: WebClient, *, run_triage: Triage = triage,
                 inflight: InFlight | None = None, max_queued: int = MAX_QUEUED,
                 engine: Engine | None = None) -> None:
        self.settings = settings
        self.engine = engine  # the bot's open knowledge base; None: each analysis opens its own
        self.client = client
        self.run_triage = run_triage
        self.inflight = inflight or InFlight()
        self.pool = ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="l4-diagnose")
        self._futures: set[Future] = set()
        self._messages: dict[Future, tuple[str, str, str]] = {}  # future -> (ref, channel, progress ts)
        self.max_queued = max_queued
        self._lock = threading.Lock()

    def request(self, ref: str, channel: str, thread_ts: str, user: str | None = None
                ) -> Accepted | AlreadyRunning | Busy:
        """Start diagnosing ``ref`` with its answer in ``channel``/``thread_ts`` (see module doc)."""
        where = Where(channel, thread_ts)
        running = self.inflight.claim(ref, where)
        if running is not None:
            self._point_to(ref, running, where, user)
            return AlreadyRunning(ref, running)
        with self._lock:
            queued = len(self._futures)
        if queued >= self.max_queued:
            self.inflight.release(ref)
            text, blocks = error_message(ref, f"I am busy with {queued} analyses; ask again in a few minutes")
            self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text, blocks=blocks)
            return Busy(ref, where)
        try:
            text, blocks = progress_message(ref)
            posted = self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text,
                                                  blocks=blocks)
        except BaseException:
            self.inflight.release(ref)
            raise
        ts = str(posted["ts"])
        requested_at = datetime.now(UTC)
        future = self.pool.submit(self._work, ref, where, ts, requested_at)
        with self._lock:
            self._futures.add(future)
            self._messages[future] = (ref, where.channel, ts)
        future.add_done_callback(self._forget)
        return Accepted(ref, where, ts)

    def _forget(self, future: Future) -> None:
        with self._lock:
            self._futures.discard(future)
            self._messages.pop(future, None)

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Wait until no analysis is queued or running (for tests and shutdown)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._futures:
                    return True
            time.sleep(0.02)
        return False

    def shutdown(self, wait: bool = True) -> None:
        """Stop the pool. Without ``wait``, queued analyses are cancelled and their progress messages
        say so; running ones are left to finish."""
        if wait:
            self.pool.shutdown(wait=True)
            return
        with self._lock:
            pending = [(f, m) for f, m in self._messages.items() if not f.running() and not f.done()]
        self.pool.shutdown(wait=False, cancel_futures=True)
        for future, (ref, channel, ts) in pending:
            if not future.cancelled():
                continue
            text, blocks = error_message(ref, "the bot stopped before this analysis started; ask again")
            try:
                self.client.chat_update(channel=channel, ts=ts, text=text, blocks=blocks)
            except (SlackApiError, SlackClientError) as exc:
                log.warning("cannot tell %s that it was cancelled: %s", _shown(ref), slack_error(exc))

    # -- the work ----------------------------------------------------------------------------------
    def _point_to(self, ref: str, running: Where, asked_in: Where, user: str | None) -> None:
        link = self._permalink(running)
        whom = f"<@{user}> " if user else ""
        where = f"<{link}|this thread>" if link else f"the thread in <#{running.channel}>"
        same = running == asked_in
        text = (f"{whom}*{escape(ref)}* is already being diagnosed"
                + (" here; the summary will replace the progress message above." if same
                   else f"; follow {where} for the result."))
        try:
            t, blocks = note_message(text)
            self.client.chat_postMessage(channel=asked_in.channel, thread_ts=asked_in.thread_ts, text=t,
                                         blocks=blocks)
        except (SlackApiError, SlackClientError) as exc:
            log.warning("cannot point %s to the running analysis of %s: %s", asked_in, _shown(ref),
                        slack_error(exc))

    def _permalink(self, where: Where) -> str | None:
        try:
            link = self.client.chat_getPermalink(channel=where.channel, message_ts=where.thread_ts)
            value = link.get("permalink")
            return str(value) if value else None
        except (SlackApiError, SlackClientError):
            return None

    def _work(self, ref: str, where: Where, message_ts: str, requested_at: datetime) -> None:
        progress = _ProgressMessage(self.client, where.channel, message_ts, ref)
        try:
            req = TriageRequest(job=ref, database_url=self.settings.database_url, engine=self.engine,
                                requested_at=requested_at,
                                slack_channel=where.channel, slack_thread_ts=where.thread_ts,
                                settings=self.settings, local_paths=False)
            result = self.run_triage(req, progress=progress.files, on_phase=progress.phase,
                                     on_fetch=progress.fetched)
            text, blocks = summary_message(result.diagnosis, result.diagnosis_id)
            diagnosis = result.diagnosis
        except (JobError, KbError, ConfigError) as exc:
            text, blocks = error_message(ref, str(exc))
        except Exception as exc:  # noqa: BLE001 - one line in the thread, the trace in the bot's log
            log.exception("diagnosis of %s failed", _shown(ref))
            text, blocks = error_message(ref, f"internal error ({type(exc).__name__}); the bot's log "
                                              "has the details")
        else:
            progress.final(text, blocks)
            self._attach_plots(ref, where, diagnosis)
            return
        finally:
            self.inflight.release(ref)
        progress.final(text, blocks)

    def _attach_plots(self, ref: str, where: Where, diagnosis: Diagnosis) -> None:
        """The diagnosis' plots (node scores, iterations, node × event heat map) into the thread."""
        try:
            files = [OutFile(name, png, name.rsplit(".", 1)[0].replace("-", " "))
                     for name, png in diagnosis_pngs(diagnosis)]
            upload_files(self.client, where.channel, where.thread_ts, files)
        except (SlackApiError, SlackClientError) as exc:  # plots are a bonus; the summary is posted
            log.warning("cannot attach the plots of %s: %s", _shown(ref), slack_error(exc))
        except Exception:  # noqa: BLE001 - a plotting bug must not look like a failed diagnosis
            log.exception("plots of %s failed", _shown(ref))


class _ProgressMessage:
    """Edits the progress message: phase changes at once, file counts at most every few seconds."""

    def __init__(self, client: WebClient, channel: str, ts: str, label: str) -> None:
        self.client, self.channel, self.ts, self.label = client, channel, ts, label
        self.phase_name: str | None = None
        self.last = 0.0

    def phase(self, name: str) -> None:
        self.phase_name = name
        if name in ("parsing", "analyzing"):  # the long phases; the others pass in a blink
            self._edit(*progress_message(self.label, name), force=True)

    def fetched(self, done: int, total: int | None) -> None:
        first = self.phase_name != "fetching"
        self.phase_name = "fetching"
        self._edit(*progress_message(self.label, "fetching", done, total), force=first)

    def files(self, done: int, total: int, _bytes: int) -> None:
        self._edit(*progress_message(self.label, "parsing", done, total), force=done == total)

    def _edit(self, text: str, blocks: list, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < UPDATE_EVERY_SECONDS:
            return
        self.last = now
        try:
            self.client.chat_update(channel=self.channel, ts=self.ts, text=text, blocks=blocks)
        except (SlackApiError, SlackClientError) as exc:  # progress is best effort
            log.warning("cannot update the progress of %s: %s", self.label, slack_error(exc))

    def final(self, text: str, blocks: list) -> None:
        try:
            self.client.chat_update(channel=self.channel, ts=self.ts, text=text, blocks=blocks)
        except (SlackApiError, SlackClientError) as exc:
            log.warning("cannot post the result for %s: %s", self.label, slack_error(exc))
            why = f"the summary could not be posted ({slack_error(exc)})"
            fallback, fb_blocks = error_message(self.label, why)
            try:
                self.client.chat_update(channel=self.channel, ts=self.ts, text=fallback, blocks=fb_blocks)
            except (SlackApiError, SlackClientError):
                log.warning("cannot post the failure for %s either", self.label)


def _shown(ref: str) -> str:
    """``ref`` fit for the bot's log: a link without credentials or query string (bot.sources)."""
    return safe_url(ref) if "://" in ref else ref
