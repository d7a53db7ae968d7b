"""``l4 bot``: run the Slack bot in Socket Mode, or ``--http --port N`` for Slack's HTTP events."""
from __future__ import annotations

import argparse
import logging
import sys

from slack_bolt.error import BoltError
from slack_sdk.errors import SlackApiError, SlackClientError

log = logging.getLogger("l4.bot")


def _run(args: argparse.Namespace) -> int:
    from bot.config import ConfigError, Settings
    from bot.serve import check_http, check_socket_mode, http_server, socket_mode_handler

    settings = Settings.from_env()
    if args.http:
        check_http(settings)
    else:
        check_socket_mode(settings)
    if not 0 <= args.port < 65536:
        raise ConfigError(f"--port must be between 0 and 65535, got {args.port}")
    from bot.sources import validate_settings

    validate_settings(settings)  # report hosts/networks/rules, CA bundle, log-root backend: fail now
    if settings.digest_channel:
        from bot.scheduler import cron_trigger

        cron_trigger(settings.digest_cron)  # a bad L4_DIGEST_CRON is a one-line error before anything starts
    from bot.app import create_app  # the engine's imports take a moment: only once the settings are fine
    logging.getLogger("l4").setLevel(logging.INFO)
    logging.getLogger("bot").setLevel(logging.INFO)
    from bot.app import build_services
    from bot.slack.client import make_web_client

    try:
        services = build_services(settings, make_web_client(settings))
        app = create_app(settings, services=services)
    except (BoltError, SlackClientError, OSError) as exc:  # auth.test at start: bad token, no network
        print(f"l4 bot: cannot start: {_reason(exc)}", file=sys.stderr)
        return 1
    from bot.scheduler import start_digest_scheduler

    scheduler = start_digest_scheduler(settings, app.client)  # None unless L4_DIGEST_CHANNEL is set
    if scheduler is not None:
        print(f"l4 bot: digest to {settings.digest_channel} on '{settings.digest_cron}' (UTC)",
              file=sys.stderr, flush=True)
    try:
        if args.http:
            server = http_server(app, args.host, args.port)
            host, port = server.server_address[:2]
            print(f"l4 bot: listening on http://{host}:{port}/slack/events", file=sys.stderr, flush=True)
            try:
                server.serve_forever()
            finally:
                server.server_close()
            return 0
        handler = socket_mode_handler(app, settings)
        print("l4 bot: starting in Socket Mode; press Ctrl-C to stop", file=sys.stderr, flush=True)
        handler.start()
        return 0
    finally:
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        services.diagnoser.shutdown(wait=False)  # queued analyses are cancelled and say so


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SlackApiError):
        return f"Slack answered {exc.response.get('error') or 'an error'}"
    text = str(getattr(exc, "reason", None) or exc).splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bot", help="run the Slack bot (Socket Mode, or --http)")
    p.add_argument("--http", action="store_true", help="serve POST /slack/events instead of Socket Mode")
    p.add_argument("--port", type=int, default=3000, help="HTTP port (default 3000; 0 picks a free one)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP address to bind (default 127.0.0.1)")
    p.set_defaults(func=_run)
