"""The bot's analyses as tasks on a Dask cluster (``L4_DASK_SCHEDULER``), so that many failures at
once do not queue behind each other in the bot.

A worker thread of the bot resolves the job (remote logs fetched into the cache, which the workers
must see at the same path, as they see ``L4_LOG_ROOT``), reads the family's normal pool, and submits
``engine.executor_dask.analyse_on_worker`` with the folders' paths: the task parses and analyses on
a worker and returns the ``JobAnalysis`` (plain dataclasses). The thread then matches it against the
knowledge base and stores it (``bot.triage.conclude``): the database is written only here. The
thread does nothing but wait on the future, so the bot runs ``L4_DASK_MAX_ANALYSES`` of them.

- **Budget and stop.** Past ``L4_ANALYSIS_TIMEOUT`` (or when the bot stops) the future is cancelled
  and the answer is ``TimedOut`` (``Stopped``). A task already running on a worker runs to its end
  (Dask cannot interrupt a running thread), but its result is dropped, so nothing is stored.
- **The cluster gone** (unreachable when submitting, or its connection lost mid-analysis): with
  ``L4_DASK_FALLBACK=local`` the analysis runs on this machine in a child process
  (``bot.analysis_process.ProcessRunner``), at most ``L4_WORKERS`` at once, in what is left of the
  budget; otherwise the answer is ``Unreachable`` in one line (the bot keeps the request queued for
  its next start). A worker lost mid-analysis is the scheduler's to handle: it runs the task again
  elsewhere; when workers keep dying on it the answer is ``Died`` (the bot tries again).
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from concurrent.futures import CancelledError
from typing import Any

from bot.analysis_process import (
    POLL_SECONDS,
    Died,
    Events,
    Failed,
    Outcome,
    ProcessRunner,
    Refused,
    Stopped,
    Stored,
    TimedOut,
    Unreachable,
    quietly,
    until_ready,
)
from bot.config import ConfigError, Settings
from bot.sources.netguard import safe_url
from bot.triage import Prepared, TriageRequest, conclude, prepared
from engine.executor_dask import DaskExecutor, DaskUnavailable, analyse_on_worker, one_line
from engine.ingest import JobError
from engine.job_analysis import JobAnalysis
from kb import KbError

log = logging.getLogger("l4.cluster")


class _Lost(Exception):
    """The cluster cannot be used for this analysis (the text is one line)."""


class DaskRunner:
    """Runs ``bot.triage``'s analysis on the cluster of ``settings.dask_scheduler`` (module doc);
    ``engine`` is the bot's open knowledge base."""

    budgeted = True

    def __init__(self, settings: Settings, engine: Any) -> None:
        assert settings.dask_scheduler
        self.settings = settings
        self.engine = engine
        self.address = settings.dask_scheduler
        self.slots = settings.dask_max_analyses  # the bot's threads: each one waits on one future
        self.local = ProcessRunner() if settings.dask_fallback == "local" else None
        self._local_slots = threading.BoundedSemaphore(settings.workers)
        self._lock = threading.Lock()
        self._executor: DaskExecutor | None = None

    def warm(self) -> None:
        """Connect now rather than at the first job; an unreachable cluster is one warning."""
        if self.local is not None:
            self.local.warm()
        try:
            self._client()
        except _Lost as exc:
            log.warning("%s (analyses will %s)", exc, "run on this machine" if self.local
                        else "end with one line until it is back")

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        _close(executor)

    def _client(self) -> Any:
        """The client, (re)connected when it is not running (the scheduler restarted). One thread
        connects; the others wait for it (they need the same client)."""
        with self._lock:
            if self._executor is not None and self._executor.client.status == "running":
                return self._executor.client
            old, self._executor = self._executor, None
            _close(old)
            try:
                self._executor = DaskExecutor(self.address,
                                              connect_timeout=self.settings.dask_connect_timeout)
            except DaskUnavailable as exc:
                raise _Lost(str(exc)) from None
            return self._executor.client

    def run(self, fields: dict[str, Any], budget: float, events: Events, stop: threading.Event) -> Outcome:
        deadline = time.monotonic() + budget
        req = TriageRequest(**fields, engine=self.engine)
        settings = req.settings or self.settings
        req.settings = settings

        def phase(name: str) -> None:
            quietly(events, "phase", (name,))
        try:
            phase("resolving")
            with prepared(req, settings, self.engine, lambda *a: quietly(events, "fetched", a)) as prep:
                phase("parsing")
                answer = self._on_cluster(prep, req, budget, deadline, stop)
                if not isinstance(answer, JobAnalysis):
                    return answer
            return Stored(conclude(req, prep, answer, self.engine, phase).diagnosis_id)
        except _Lost as exc:
            return self._fall_back(str(exc), fields, deadline, events, stop)
        except (JobError, KbError, ConfigError) as exc:
            return Refused(str(exc))
        except Exception as exc:  # noqa: BLE001 - one line in the thread, the trace in the bot's log
            log.exception("diagnosis of %s failed", req.job)
            return Failed(type(exc).__name__)

    def _on_cluster(self, prep: Prepared, req: TriageRequest, budget: float, deadline: float,
                    stop: threading.Event) -> JobAnalysis | Outcome:
        client = self._client()
        key = f"l4-analysis-{uuid.uuid4().hex[:12]}"
        submitted = time.time()
        try:
            future = client.submit(analyse_on_worker, prep.job, prep.history, prep.pool, req.top_nodes,
                                   known=prep.known, key=key, pure=False)
        except (OSError, TimeoutError, CancelledError) as exc:
            raise _Lost(f"Dask cluster {self.address} failed ({one_line(exc)})") from None
        done = False
        finished = threading.Event()  # waited on here: future.result(timeout) polled from many threads
        future.add_done_callback(lambda _f: finished.set())  # races inside distributed's sync()
        try:
            while True:
                ended = until_ready(finished.wait, deadline, budget, stop)
                if ended is not None:
                    return ended
                try:
                    answer = future.result()
                except CancelledError:  # not by us: the client lost the scheduler
                    raise _Lost(f"Dask scheduler {self.address} unreachable (the connection was lost "
                                "mid-analysis)") from None
                except (OSError, DaskUnavailable) as exc:
                    if isinstance(exc, DaskUnavailable) or future.status != "error":
                        raise _Lost(f"Dask cluster {self.address} failed ({one_line(exc)})") from None
                    raise  # the task's own OSError: a bug, the bot's log has it
                except Exception as exc:
                    if exc.__class__.__name__ != "KilledWorker":
                        raise  # the task's error (JobError: bad input)
                    return Died(f"the Dask workers running it kept dying ({one_line(exc)})")
                done = True
                times = {"submitted": submitted, "started": answer.started, "finished": answer.finished,
                         "answered": time.time()}  # started, finished: on the worker
                log.info("%s analysed on the cluster in %.1f s (%.1f s after it was submitted)",
                         prep.job.root, answer.finished - answer.started, times["answered"] - submitted,
                         extra={"l4_analysis": times})
                return answer
        finally:
            if not done:
                try:
                    future.cancel()  # the result, if it ever comes, is dropped
                except Exception:  # noqa: BLE001 - a client of a gone scheduler
                    log.debug("cancelling %s failed", key, exc_info=True)

    def _fall_back(self, why: str, fields: dict[str, Any], deadline: float, events: Events,
                   stop: threading.Event) -> Outcome:
        if self.local is None:
            return Unreachable(why)
        ref = str(fields.get("job"))
        log.warning("%s; analysing %s on this machine instead (L4_DASK_FALLBACK=local)", why,
                    safe_url(ref) if "://" in ref else ref)
        settings = fields.get("settings") or self.settings
        local = dict(fields, settings=dataclasses.replace(settings, dask_scheduler=None))
        while not self._local_slots.acquire(timeout=POLL_SECONDS):  # L4_WORKERS local analyses at once
            if stop.is_set():
                return Stopped()
            if time.monotonic() >= deadline:
                return TimedOut(self.settings.analysis_timeout)
        try:
            left = deadline - time.monotonic()
            if left <= 0:
                return TimedOut(self.settings.analysis_timeout)
            return self.local.run(local, left, events, stop)
        finally:
            self._local_slots.release()


def _close(executor: DaskExecutor | None) -> None:
    if executor is None:
        return
    try:
        executor.close()
    except Exception:  # noqa: BLE001 - a client of a gone scheduler may fail to close
        log.debug("closing the Dask client failed", exc_info=True)
