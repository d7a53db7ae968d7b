"""``GET /healthz`` and ``GET /metrics`` of ``l4 bot``.

/healthz answers 200 when the knowledge base's database answers ``SELECT 1`` (within
``CHECK_TIMEOUT`` seconds) and Slack is connected (Socket Mode: the WebSocket is open; HTTP mode:
``auth.test`` passed within the last ``SLACK_CHECK_EVERY`` seconds), else 503; the JSON body says
which, and the queue depth. /metrics is the Prometheus text of bot.metrics. HTTP mode serves both on
the bot's own port (`health_routes` in front of the Slack handler); Socket Mode on L4_HEALTH_PORT
(`health_server`).
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler

from sqlalchemy import text
from sqlalchemy.engine import Engine

from bot import metrics
from bot.httpd import BoundedWSGIServer, HttpLimits

log = logging.getLogger("l4.health")
CHECK_TIMEOUT = 3.0  # seconds the database may take to answer a health check
SLACK_CHECK_EVERY = 60.0  # HTTP mode: seconds an auth.test result is trusted
HEALTH_PATH, METRICS_PATH = "/healthz", "/metrics"


def database_reachable(engine: Engine, timeout: float = CHECK_TIMEOUT) -> str | None:
    """None when the database answers ``SELECT 1`` within ``timeout``, else why not (one line)."""
    result: list[str | None] = []

    def probe() -> None:
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            result.append(None)
        except Exception as exc:  # noqa: BLE001 - any failure is the answer
            result.append(f"{exc.__class__.__name__}: {(str(exc).splitlines() or [''])[0][:160]}")

    worker = threading.Thread(target=probe, name="l4-health-db", daemon=True)
    worker.start()
    worker.join(timeout)
    return result[0] if result else f"no answer within {timeout:g} s"


class SlackProbe:
    """HTTP mode's "Slack connected": ``auth.test`` with the bot's client, at most once a minute."""

    def __init__(self, client: Any, every: float = SLACK_CHECK_EVERY) -> None:
        self.client, self.every = client, every
        self._lock = threading.Lock()
        self._checked = float("-inf")
        self._ok = False

    def __call__(self) -> bool:
        with self._lock:
            if time.monotonic() - self._checked < self.every:
                return self._ok
            try:
                self._ok = bool(self.client.auth_test().get("ok"))
            except Exception as exc:  # noqa: BLE001 - unreachable or refused: not connected
                log.warning("health: Slack auth.test failed: %s", exc.__class__.__name__)
                self._ok = False
            self._checked = time.monotonic()
            return self._ok


@dataclass
class Health:
    """What /healthz checks: the engine, Slack (a callable: connected?), the queue depth."""

    engine: Engine
    slack_connected: Callable[[], bool]
    queue_depth: Callable[[], int]
    timeout: float = CHECK_TIMEOUT
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def report(self) -> tuple[bool, dict[str, Any]]:
        with self._lock:  # probes of several clients at once check once each in turn
            db_error = database_reachable(self.engine, self.timeout)
            try:
                slack = bool(self.slack_connected())
            except Exception:  # noqa: BLE001
                slack = False
        body: dict[str, Any] = {"database": "ok" if db_error is None else "unreachable",
                                "slack": "connected" if slack else "disconnected",
                                "queue_depth": int(self.queue_depth())}
        if db_error is not None:
            body["database_error"] = db_error
        ok = db_error is None and slack
        body["status"] = "ok" if ok else "unhealthy"
        return ok, body


def _respond(start_response: Callable[..., Any], status: str, body: bytes, ctype: str) -> list[bytes]:
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body))),
                            ("Cache-Control", "no-store")])
    return [body]


def health_routes(health: Health, fallback: Callable[..., Iterable[bytes]] | None = None
                  ) -> Callable[..., Iterable[bytes]]:
    """A WSGI app answering GET/HEAD /healthz and /metrics; other requests go to ``fallback``
    (404 without one)."""
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        if path in (HEALTH_PATH, METRICS_PATH) and method in ("GET", "HEAD"):
            if path == HEALTH_PATH:
                ok, report = health.report()
                if not ok:
                    log.warning("health: %s", json.dumps(report, sort_keys=True))
                out = _respond(start_response, "200 OK" if ok else "503 Service Unavailable",
                               (json.dumps(report, sort_keys=True) + "\n").encode(), "application/json")
            else:
                out = _respond(start_response, "200 OK", metrics.exposition(), metrics.CONTENT_TYPE)
            return [] if method == "HEAD" else out
        if fallback is not None:
            return fallback(environ, start_response)
        return _respond(start_response, "404 Not Found", b"not found\n", "text/plain")

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - wsgiref's signature
        log.debug("%s " + format, self.address_string(), *args)


def health_server(health: Health, host: str = "127.0.0.1", port: int = 8080) -> BoundedWSGIServer:
    """A small bounded server of /healthz and /metrics only (Socket Mode); call ``serve_forever``."""
    limits = HttpLimits(max_connections=16, workers=2, idle_timeout=5, read_timeout=5, request_deadline=10)
    server = BoundedWSGIServer((host, port), _QuietHandler, limits)
    server.set_app(health_routes(health))
    return server


def serve_in_background(server: BoundedWSGIServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="l4-health", daemon=True)
    thread.start()
    return thread
