"""The Bolt app factory of the L4 Slack bot (CONTRACTS §4).

``create_app(settings)`` builds the Web API client (``SLACK_API_URL`` when set; 429s and connection
errors retried by slack_sdk's retry handlers), opens the knowledge base, and registers the
listeners. Serve it with ``bot.serve`` (Socket Mode or HTTP).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from slack_bolt import App
from slack_sdk import WebClient

from bot.config import Settings
from bot.slack import commands, deliveries, interactions, listeners
from bot.slack.client import make_web_client
from bot.slack.diagnoser import Diagnoser, Triage
from bot.slack.knowledge import Knowledge
from bot.slack.permissions import SrePolicy
from kb.db import open_db

log = logging.getLogger(__name__)


class _NoTokenSkippedWarning(logging.Filter):
    """Bolt warns that SLACK_BOT_TOKEN (read from the environment) is unused when a client is given:
    it is the same token, so the warning is noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


@dataclass
class BotServices:
    """What the listeners call."""

    settings: Settings
    knowledge: Knowledge
    diagnoser: Diagnoser
    policy: SrePolicy


def build_services(settings: Settings, client: WebClient, *, run_triage: Triage | None = None) -> BotServices:
    """The knowledge base (opened and migrated now), the worker pool and the SRE policy. The
    analyses run ``bot.triage`` in child processes; ``run_triage`` runs another one in the thread."""
    engine = open_db(settings.database_url)  # opened and migrated once, shared by every service
    return BotServices(
        settings=settings,
        knowledge=Knowledge(engine),
        diagnoser=Diagnoser(settings, client, run_triage=run_triage, engine=engine),
        policy=SrePolicy(settings),
    )


def create_app(settings: Settings, client: WebClient | None = None, *,
               services: BotServices | None = None) -> App:
    """The Bolt app with every listener registered (``services`` default: ``build_services``)."""
    if services is not None:
        client = services.diagnoser.client
    client = client or make_web_client(settings)
    services = services or build_services(settings, client)
    bolt_log = logging.getLogger("l4.bolt")
    if not any(isinstance(f, _NoTokenSkippedWarning) for f in bolt_log.filters):
        bolt_log.addFilter(_NoTokenSkippedWarning())
    app = App(client=client, signing_secret=settings.slack_signing_secret or "",
              process_before_response=False, logger=bolt_log)
    deliveries.register(app, services.knowledge.engine)  # first: a redelivery runs no listener
    listeners.register(app, services)
    interactions.register(app, services)
    commands.register(app, services)

    @app.error
    def on_error(error: Exception, body: dict[str, Any]) -> None:
        kind = body.get("type") or (body.get("event") or {}).get("type") or "request"
        deliveries.forget(services.knowledge.engine, body)  # Slack's retry of it is handled afresh
        log.error("%s failed: %s: %s", kind, type(error).__name__, str(error).splitlines()[0][:200]
                  if str(error) else "")

    return app
