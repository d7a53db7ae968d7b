"""Running the bot: Socket Mode (``SocketModeHandler``) or HTTP (``POST /slack/events``).

HTTP mode serves Bolt's WSGI adapter from `httpd.BoundedWSGIServer` (a capped number of
connections, idle and read timeouts, a deadline per request, a fixed pool of worker threads). Every
POST's signature is checked on its raw bytes (SLACK_SIGNING_SECRET) before anything parses it: an
unsigned or badly signed request is answered 401 with one log line. With a ``health``
(bot.health), ``GET /healthz`` and ``GET /metrics`` are answered on the same port, unsigned.
"""
from __future__ import annotations

import hmac
import io
import logging
import re
import time
from collections.abc import Callable, Iterable
from hashlib import sha256
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.wsgi import SlackRequestHandler

from bot.config import ConfigError, Settings
from bot.health import Health, health_routes
from bot.httpd import BoundedWSGIServer, HttpLimits

log = logging.getLogger(__name__)
EVENTS_PATH = "/slack/events"
MAX_BODY_BYTES = 1 << 20  # Slack's requests are a few kB; anything this big is not from Slack
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
MAX_CLOCK_SKEW = 300  # seconds between a request's timestamp and now (Slack's own rule)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - wsgiref's signature
        log.debug("%s " + format, self.address_string(), *args)


def _answer(start_response: Callable[..., Any], status: str, text: str) -> list[bytes]:
    body = (text + "\n").encode()
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def signed(secret: str, body: bytes, timestamp: str, signature: str, now: float | None = None) -> bool:
    """Whether `signature` is Slack's v0 signature of the raw `body` at `timestamp` (digits, within
    5 minutes of now). Computed on the bytes as received (slack_sdk's verifier decodes them as
    UTF-8 first, and raises on a body that is not)."""
    if not secret or not _TIMESTAMP.fullmatch(timestamp) or not signature.isascii():
        return False
    if abs((time.time() if now is None else now) - int(timestamp)) > MAX_CLOCK_SKEW:
        return False
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, sha256).hexdigest()
    return hmac.compare_digest(expected, signature)


def _verify_first(wsgi_app: Callable[..., Iterable[bytes]], secret: str) -> Callable[..., Iterable[bytes]]:
    """Read a POST's body (at most MAX_BODY_BYTES, of a stated length), check its signature on the
    raw bytes, and only then hand it to Bolt: an unauthenticated client makes the bot buffer no
    more than that, parse nothing and log one line."""
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return wsgi_app(environ, start_response)
        who = environ.get("REMOTE_ADDR", "?")
        try:
            length = int(environ.get("CONTENT_LENGTH") or "")
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY_BYTES:
            log.warning("HTTP: refused a request from %s: body too large or of unknown length", who)
            return _answer(start_response, "413 Payload Too Large",
                           "request body too large or of unknown length")
        try:
            body = environ["wsgi.input"].read(length)
        except OSError as exc:
            log.warning("HTTP: request from %s: body not received (%s)", who, exc.__class__.__name__)
            return _answer(start_response, "408 Request Timeout", "request body not received in time")
        if len(body) != length:
            log.warning("HTTP: request from %s: body shorter than its Content-Length", who)
            return _answer(start_response, "400 Bad Request", "request body shorter than its Content-Length")
        if not signed(secret, body, environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP", ""),
                      environ.get("HTTP_X_SLACK_SIGNATURE", "")):
            log.warning("HTTP: refused a request from %s: missing or invalid Slack signature", who)
            return _answer(start_response, "401 Unauthorized", "invalid request signature")
        environ["wsgi.input"] = io.BytesIO(body)
        return wsgi_app(environ, start_response)

    return app


def http_server(app: App, host: str = "127.0.0.1", port: int = 3000, *, limits: HttpLimits | None = None,
                signing_secret: str | None = None, health: Health | None = None) -> BoundedWSGIServer:
    """The HTTP server of ``app`` at ``POST /slack/events`` (call ``serve_forever()``, then
    ``server_close()``), and of /healthz and /metrics with ``health``. Limits default to the
    L4_HTTP_* settings; the signing secret to the app's."""
    secret = signing_secret if signing_secret is not None else getattr(app, "_signing_secret", "")
    if not secret:
        raise ConfigError("SLACK_SIGNING_SECRET is not set; HTTP mode needs it to verify Slack's requests")
    server = BoundedWSGIServer((host, port), _QuietHandler, limits or HttpLimits.from_env())
    slack_app = _verify_first(SlackRequestHandler(app, path=EVENTS_PATH), secret)
    server.set_app(health_routes(health, slack_app) if health is not None else slack_app)
    return server


def _check_bot_token(settings: Settings) -> None:
    if not settings.slack_bot_token:
        raise ConfigError("SLACK_BOT_TOKEN is not set (the bot token, xoxb-…); see .env.example")


def check_http(settings: Settings) -> None:
    _check_bot_token(settings)
    if not settings.slack_signing_secret:
        raise ConfigError("SLACK_SIGNING_SECRET is not set; HTTP mode needs it to verify Slack's requests")
    HttpLimits.from_env()  # a bad L4_HTTP_* setting is a one-line error before anything starts


def check_socket_mode(settings: Settings) -> None:
    _check_bot_token(settings)
    if not settings.slack_app_token:
        raise ConfigError("SLACK_APP_TOKEN is not set (the app-level token, xapp-…); Socket Mode needs it. "
                          "Use `l4 bot --http --port N` to receive events over HTTP instead")


def socket_mode_handler(app: App, settings: Settings) -> SocketModeHandler:
    """Bolt's Socket Mode handler (call ``start()``, which blocks, or ``connect()``)."""
    check_socket_mode(settings)
    return SocketModeHandler(app, app_token=settings.slack_app_token, web_client=app.client)
