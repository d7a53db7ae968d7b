"""Slack's redeliveries start nothing: a Bolt middleware claims each event ID (``X-Slack-Retry-Num``
and Socket Mode's ``retry_attempt`` resend the same one) and each interaction's trigger ID in the
knowledge base (kb.deliveries, with a TTL, so across restarts too), and answers a second delivery
with an empty 200 without running any listener."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import App
from slack_bolt.response import BoltResponse
from sqlalchemy.engine import Engine

from kb import db as kbdb
from kb import deliveries

log = logging.getLogger(__name__)
INTERACTIONS = ("block_actions", "view_submission", "shortcut", "message_action")


def delivery_key(body: dict[str, Any]) -> str | None:
    """What identifies one delivery of ``body``: its event ID, else its trigger ID; None if neither."""
    if body.get("type") == "event_callback" and body.get("event_id"):
        return f"event:{body['event_id']}"
    trigger = body.get("trigger_id")
    if not trigger:
        return None
    if body.get("command"):
        return f"command:{trigger}"
    if body.get("type") in INTERACTIONS:
        return f"{body['type']}:{trigger}"
    return None


def register(app: App, engine: Engine) -> None:
    @app.middleware
    def once(body: dict[str, Any], next: Callable[[], None]) -> BoltResponse | None:
        key = delivery_key(body)
        if key is not None:
            with kbdb.session(engine) as s:
                first = deliveries.claim(s, key)
            if not first:
                log.info("Slack delivered %s again: ignored", key)
                return BoltResponse(status=200, body="")
        next()
        return None


def forget(engine: Engine, body: dict[str, Any]) -> None:
    """Let a delivery whose handling failed be handled when Slack sends it again."""
    key = delivery_key(body)
    if key is None:
        return
    try:
        with kbdb.session(engine) as s:
            deliveries.forget(s, key)
    except Exception:  # noqa: BLE001 - at worst the retry is ignored
        log.warning("cannot forget the delivery %s", key, exc_info=True)
