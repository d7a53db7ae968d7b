"""``l4 bot``: run the Slack bot in Socket Mode, or ``--http --port N`` for Slack's HTTP events.

At start it resumes the requests a stopped or killed bot left unfinished. SIGTERM (systemd,
Kubernetes) stops it like Ctrl-C: no new events, running analyses get L4_DRAIN_SECONDS to finish,
the threads of the rest are told they resume at the next start, and it exits 0.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

from slack_bolt.error import BoltError
from slack_sdk.errors import SlackApiError, SlackClientError

from engine.interrupts import SIGNAL_POLL_SECONDS

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
        client = make_web_client(settings)
        client.timeout = settings.slack_timeout  # type: ignore[assignment] - urllib takes seconds as float
        services = build_services(settings, client)
        app = create_app(settings, services=services)
    except (BoltError, SlackClientError, OSError) as exc:  # auth.test at start: bad token, no network
        print(f"l4 bot: cannot start: {_reason(exc)}", file=sys.stderr)
        return 1
    from bot.scheduler import start_digest_scheduler

    handler = None
    health, health_srv = _health(settings, services, app, lambda: handler, args)  # a busy port: fail now
    signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
    services.diagnoser.runner.warm()
    resumed = services.diagnoser.resume()
    if resumed:
        print(f"l4 bot: resuming {resumed} request(s) left unfinished", file=sys.stderr, flush=True)
    scheduler = start_digest_scheduler(settings, app.client)  # None unless L4_DIGEST_CHANNEL is set
    if scheduler is not None:
        print(f"l4 bot: digest to {settings.digest_channel} on '{settings.digest_cron}' (UTC)",
              file=sys.stderr, flush=True)
    try:
        if args.http:
            server = http_server(app, args.host, args.port, health=health)
            host, port = server.server_address[:2]
            print(f"l4 bot: listening on http://{host}:{port}/slack/events", file=sys.stderr, flush=True)
            try:
                server.serve_forever()
            finally:
                server.server_close()
            return 0
        handler = socket_mode_handler(app, settings)
        print("l4 bot: starting in Socket Mode; press Ctrl-C to stop", file=sys.stderr, flush=True)
        handler.connect()
        print("l4 bot: connected to Slack in Socket Mode", file=sys.stderr, flush=True)
        _wait_for_a_signal()
        return 0
    except KeyboardInterrupt:
        return 0  # Ctrl-C or SIGTERM: drained below
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the drain short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if handler is not None:
            _close_quietly(handler)  # no new events while draining
        if health_srv is not None:
            health_srv.shutdown()
            health_srv.server_close()
        if scheduler is not None:
            scheduler.shutdown(wait=False)
        print(f"l4 bot: stopping; running analyses get {settings.drain_seconds:g} s to finish",
              file=sys.stderr, flush=True)
        left = services.diagnoser.drain(settings.drain_seconds)
        if left:
            print(f"l4 bot: {left} request(s) resume at the next start", file=sys.stderr, flush=True)


def _health(settings, services, app, handler, args):  # noqa: ANN001, ANN202 - wiring of _run
    """/healthz and /metrics: on the HTTP port (returned for http_server), or in Socket Mode on
    L4_HEALTH_PORT (a server started here, returned to be stopped) when it is set."""
    from bot import metrics
    from bot.config import ConfigError
    from bot.health import Health, SlackProbe, health_server, serve_in_background

    metrics.watch_queue(services.diagnoser.queue_depth)
    if args.http:
        slack = SlackProbe(app.client)
    else:
        def slack() -> bool:
            h = handler()
            return bool(h is not None and h.client.is_connected())
    health = Health(services.knowledge.engine, slack, services.diagnoser.queue_depth)
    if args.http or settings.health_port is None:
        return health, None
    try:
        server = health_server(health, args.host, settings.health_port)
    except OSError as exc:
        raise ConfigError(f"L4_HEALTH_PORT={settings.health_port}: cannot listen on {args.host}: "
                          f"{exc.strerror or exc.__class__.__name__}") from None
    host, port = server.server_address[:2]
    serve_in_background(server)
    print(f"l4 bot: health on http://{host}:{port}/healthz and /metrics", file=sys.stderr, flush=True)
    return health, server


def _stop_like_ctrl_c(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _wait_for_a_signal() -> None:
    """Block the main thread until SIGTERM or Ctrl-C raises KeyboardInterrupt here. Not in one untimed
    wait (Bolt's `SocketModeHandler.start()`, `Event().wait()`): the kernel may hand a process's signal to
    any of the Socket Mode client's threads, and then CPython runs its handler only when the main thread
    next wakes, which an untimed lock wait never does, so a SIGTERM could leave the bot running forever
    (seen in CI: no "stopping" line six minutes after the signal). A timed wait wakes often enough."""
    never = threading.Event()
    while not never.wait(SIGNAL_POLL_SECONDS):
        pass


def _close_quietly(handler: object) -> None:
    try:
        handler.close()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - stopping anyway
        log.debug("closing the Socket Mode connection failed", exc_info=True)


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
