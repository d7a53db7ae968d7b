"""One analysis (``bot.triage``) with a wall-clock budget, in a child process the bot can kill.

The bot's worker thread calls ``ProcessRunner.run``: the triage runs in a process forked from a
fork server that imported the engine once (so a start costs milliseconds), sends its phases and
progress back over a pipe, and answers with the stored diagnosis' ID or why it failed. When the
budget is spent, or the bot must stop, the process is killed. The child ignores SIGINT/SIGTERM (the
bot decides when it ends) and exits by itself when its parent is gone, so a killed bot leaves no
analysis running to store a second diagnosis. ``InlineRunner`` runs an injected triage function in
the worker thread instead (tests); it has no budget.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Protocol

from bot.config import ConfigError
from engine.ingest import JobError
from kb import KbError

log = logging.getLogger(__name__)
SEND_EVERY_SECONDS = 0.25  # progress messages from the child, at most this often
POLL_SECONDS = 0.2


@dataclass(frozen=True)
class Stored:
    diagnosis_id: int


@dataclass(frozen=True)
class Refused:
    """Bad input: the job cannot be diagnosed (one line for the thread)."""

    reason: str


@dataclass(frozen=True)
class Failed:
    """The analysis raised an unexpected error (the trace is in the bot's log)."""

    kind: str


@dataclass(frozen=True)
class Died:
    """The analysis process ended without an answer (killed from outside, out of memory, crashed)."""

    reason: str


@dataclass(frozen=True)
class TimedOut:
    seconds: float


@dataclass(frozen=True)
class Stopped:
    """The bot stopped the analysis (it is shutting down)."""


@dataclass(frozen=True)
class Unreachable:
    """The Dask cluster the analysis was sent to cannot be used, and there is no local fallback
    (``bot.analysis_dask``); the request stays resumable."""

    reason: str


Outcome = Stored | Refused | Failed | Died | TimedOut | Stopped | Unreachable


class Events(Protocol):
    """Where an analysis reports while it runs (the thread's progress message)."""

    def phase(self, name: str) -> None: ...
    def fetched(self, done: int, total: int | None) -> None: ...
    def files(self, done: int, total: int, bytes_done: int) -> None: ...


def quietly(events: Events, kind: str, args: tuple) -> None:
    try:
        getattr(events, kind)(*args)
    except Exception:  # noqa: BLE001 - progress is best effort; it never ends an analysis
        log.warning("progress report failed", exc_info=True)


class InlineRunner:
    """Run ``run_triage`` (a function like ``bot.triage.triage``) in the calling thread, on the
    bot's open knowledge base ``engine``."""

    budgeted = False
    slots: int | None = None  # the bot's L4_WORKERS threads run it

    def __init__(self, run_triage: Callable[..., Any], engine: Any = None) -> None:
        self.run_triage = run_triage
        self.engine = engine

    def warm(self) -> None:
        return

    def close(self) -> None:
        return

    def run(self, fields: dict[str, Any], budget: float, events: Events, stop: threading.Event) -> Outcome:
        from bot.triage import TriageRequest

        req = TriageRequest(**fields, engine=self.engine)

        def on(kind: str) -> Callable[..., None]:
            return lambda *args: quietly(events, kind, args)
        try:
            result = self.run_triage(req, progress=on("files"), on_phase=on("phase"), on_fetch=on("fetched"))
        except (JobError, KbError, ConfigError) as exc:
            return Refused(str(exc))
        except Exception as exc:  # noqa: BLE001 - one line in the thread, the trace in the bot's log
            log.exception("diagnosis of %s failed", req.job)
            return Failed(type(exc).__name__)
        return Stored(result.diagnosis_id)



def until_ready(ready: Callable[[float], bool], deadline: float, budget: float,
                stop: threading.Event) -> Outcome | None:
    """Wait, polling ``ready(timeout)``, until it says True (None), the stop is set (Stopped) or the
    monotonic ``deadline`` passes (TimedOut of ``budget``): the wait of every runner."""
    while True:
        if stop.is_set():
            return Stopped()
        left = deadline - time.monotonic()
        if left <= 0:
            return TimedOut(budget)
        if ready(min(left, POLL_SECONDS)):
            return None

class ProcessRunner:
    """Run ``bot.triage.triage`` in a child process with a budget (see the module doc). The bot
    itself never imports the engine: ``fields`` are those of a ``bot.triage.TriageRequest``."""

    budgeted = True
    slots: int | None = None  # the bot's L4_WORKERS threads run it

    def __init__(self) -> None:
        self._ctx = multiprocessing.get_context("forkserver")
        self.pids: set[int] = set()  # the analysis processes running now
        self._ctx.set_forkserver_preload([__name__, "bot.triage"])

    def warm(self) -> None:
        """Start the fork server now (it imports the engine: seconds) rather than at the first job."""
        from multiprocessing import forkserver

        forkserver.ensure_running()

    def close(self) -> None:
        return  # each analysis' process ends with its run

    def run(self, fields: dict[str, Any], budget: float, events: Events, stop: threading.Event) -> Outcome:
        receiver, sender = self._ctx.Pipe(duplex=False)
        lifeline, alive = self._ctx.Pipe(duplex=False)  # closed when this process ends, however
        child = self._ctx.Process(target=_child_main, name="l4-analysis",  # not a daemon: big jobs parse
                                  args=(sender, lifeline, fields, dict(os.environ), os.getcwd()))  # in a pool
        child.start()
        sender.close()
        lifeline.close()
        deadline = time.monotonic() + budget
        if child.pid is not None:
            self.pids.add(child.pid)
        try:
            while True:
                ended = until_ready(receiver.poll, deadline, budget, stop)
                if ended is not None:
                    return ended
                try:
                    kind, *args = receiver.recv()
                except (EOFError, OSError):
                    child.join(5)
                    return Died(_exit_reason(child.exitcode))
                if kind in ("phase", "fetched", "files"):
                    quietly(events, kind, tuple(args))
                elif kind == "stored":
                    return Stored(int(args[0]))
                elif kind == "refused":
                    return Refused(str(args[0]))
                else:
                    log.error("diagnosis of %s failed in the analysis process:\n%s", fields.get("job"),
                              args[1])
                    return Failed(str(args[0]))
        finally:
            if child.is_alive():
                _kill_group(child.pid)
            child.join(10)
            receiver.close()
            alive.close()
            self.pids.discard(child.pid or 0)


def _kill_group(pid: int | None) -> None:
    """Kill the analysis and the parsing pool it may have started (its own process group)."""
    if pid is None:
        return
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "it did not answer"
    if code < 0:
        try:
            return f"it was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"it was killed by signal {-code}"
    return f"it exited with code {code}"


# -- the child process ---------------------------------------------------------------------------
def _child_main(conn: Connection, lifeline: Connection, fields: dict[str, Any], env: dict[str, str],
                cwd: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the bot
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # drains, then kills what is left
    os.environ.clear()
    os.environ.update(env)  # the fork server's environment is the one of its start
    os.chdir(cwd)
    os.setpgid(0, 0)  # its own group: the bot kills it with its parsing pool, if any
    _exit_with_the_bot(lifeline)
    from bot.triage import TriageRequest, triage
    from kb import db as kbdb

    engine = kbdb.make_engine(fields.get("database_url"))  # the bot migrated it already
    req = TriageRequest(**fields, engine=engine)
    sender = _Sender(conn)
    try:
        result = triage(req, progress=sender.files, on_phase=sender.phase, on_fetch=sender.fetched)
        _send_or_exit(conn, ("stored", result.diagnosis_id))
    except (JobError, KbError, ConfigError) as exc:
        _send_or_exit(conn, ("refused", str(exc)))
    except Exception as exc:  # noqa: BLE001 - the bot logs the trace, the thread gets one line
        _send_or_exit(conn, ("failed", type(exc).__name__, traceback.format_exc()))
    finally:
        engine.dispose()
        conn.close()


def _exit_with_the_bot(lifeline: Connection) -> None:
    """Exit as soon as the bot is gone: its end of ``lifeline`` closes, however it ended (the fork
    server, our parent, outlives it while analyses run)."""
    def watch() -> None:
        try:
            lifeline.poll(None)
        except OSError:
            pass
        os._exit(1)  # nobody will read the answer: store nothing

    threading.Thread(target=watch, name="l4-bot-watch", daemon=True).start()


def _send_or_exit(conn: Connection, msg: tuple) -> None:
    try:
        conn.send(msg)
    except OSError:  # the bot stopped listening (it is gone, or gave up on this analysis)
        os._exit(1)


class _Sender:
    """The triage callbacks, sent to the bot (file and download counts at most every 0.25 s)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.last = 0.0

    def _send(self, *msg: Any, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= SEND_EVERY_SECONDS:
            self.last = now
            _send_or_exit(self.conn, msg)

    def phase(self, name: str) -> None:
        self._send("phase", name, force=True)

    def fetched(self, done: int, total: int | None) -> None:
        self._send("fetched", done, total, force=total is not None and done >= total)

    def files(self, done: int, total: int, bytes_done: int) -> None:
        self._send("files", done, total, bytes_done, force=done >= total)
