"""Jobs being analysed right now, and where: one analysis per job, later askers are pointed to it."""
from __future__ import annotations

import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Where:
    """The Slack thread an analysis reports in."""

    channel: str
    thread_ts: str


class InFlight:
    """A thread-safe registry job ref → the thread of its running analysis."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, Where] = {}

    @staticmethod
    def key(ref: str) -> str:
        return ref.strip().rstrip("/")

    def claim(self, ref: str, where: Where) -> Where | None:
        """Register an analysis of ``ref`` reporting at ``where``. Returns None when the caller now
        owns it, or the thread of the analysis already running (the caller must not start one)."""
        k = self.key(ref)
        with self._lock:
            current = self._running.get(k)
            if current is not None:
                return current
            self._running[k] = where
            return None

    def release(self, ref: str) -> None:
        with self._lock:
            self._running.pop(self.key(ref), None)

    def running(self) -> dict[str, Where]:
        with self._lock:
            return dict(self._running)
