"""Running the bot: Socket Mode (``SocketModeHandler``) or HTTP (``POST /slack/events``).

HTTP mode serves Bolt's WSGI adapter from a threaded ``wsgiref`` server, so a slow request never
holds up Slack's next one; Bolt verifies every request's signature with SLACK_SIGNING_SECRET.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from slack_bolt import App
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.wsgi import SlackRequestHandler

from bot.config import ConfigError, Settings

log = logging.getLogger(__name__)
EVENTS_PATH = "/slack/events"


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - wsgiref's signature
        log.debug("%s " + format, self.address_string(), *args)


MAX_BODY_BYTES = 1 << 20  # Slack's requests are a few kB; anything this big is not from Slack


def _limit_body(wsgi_app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """Refuse bodies over MAX_BODY_BYTES (or of unknown length) before Bolt reads them whole: an
    unauthenticated client must not make the bot buffer gigabytes to check a signature."""
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") == "POST":
            try:
                length = int(environ.get("CONTENT_LENGTH") or "")
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                start_response("413 Payload Too Large", [("Content-Type", "text/plain")])
                return [b"request body too large or of unknown length\n"]
        return wsgi_app(environ, start_response)

    return app


def http_server(app: App, host: str = "127.0.0.1", port: int = 3000) -> ThreadingWSGIServer:
    """A threaded HTTP server for ``app`` at ``POST /slack/events`` (call ``serve_forever()``)."""
    handler = _limit_body(SlackRequestHandler(app, path=EVENTS_PATH))
    return make_server(host, port, handler, server_class=ThreadingWSGIServer,  # type: ignore[return-value]
                       handler_class=_QuietHandler)


def _check_bot_token(settings: Settings) -> None:
    if not settings.slack_bot_token:
        raise ConfigError("SLACK_BOT_TOKEN is not set (the bot token, xoxb-…); see .env.example")


def check_http(settings: Settings) -> None:
    _check_bot_token(settings)
    if not settings.slack_signing_secret:
        raise ConfigError("SLACK_SIGNING_SECRET is not set; HTTP mode needs it to verify Slack's requests")


def check_socket_mode(settings: Settings) -> None:
    _check_bot_token(settings)
    if not settings.slack_app_token:
        raise ConfigError("SLACK_APP_TOKEN is not set (the app-level token, xapp-…); Socket Mode needs it. "
                          "Use `l4 bot --http --port N` to receive events over HTTP instead")


def socket_mode_handler(app: App, settings: Settings) -> SocketModeHandler:
    """Bolt's Socket Mode handler (call ``start()``, which blocks, or ``connect()``)."""
    check_socket_mode(settings)
    return SocketModeHandler(app, app_token=settings.slack_app_token, web_client=app.client)
