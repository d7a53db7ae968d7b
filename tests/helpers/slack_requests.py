"""Signed Slack requests for tests: Events API callbacks, button clicks, modal submissions and
slash commands, built like Slack sends them and posted to a bot's real ``/slack/events`` endpoint.

    r = post_signed(url, SECRET, event_body(message_event("C1", "U1", "job-0042 died")))
"""
from __future__ import annotations

import itertools
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from tests.helpers.fake_slack import TEAM_ID

_ts = itertools.count(1)
_ids = itertools.count(1)


@dataclass
class Reply:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None

    @property
    def text(self) -> str:
        """The reply's message text (Bolt answers a text-only ack as plain text, else as JSON)."""
        raw = self.body.decode("utf-8")
        try:
            data = json.loads(raw)
        except ValueError:
            return raw
        return str(data.get("text", "")) if isinstance(data, dict) else raw


def next_ts() -> str:
    return f"{1800000000 + next(_ts)}.000200"


def message_event(channel: str, user: str, text: str, *, ts: str | None = None,
                  thread_ts: str | None = None, **extra: Any) -> dict[str, Any]:
    ev = {"type": "message", "channel": channel, "user": user, "text": text, "ts": ts or next_ts(),
          "channel_type": "channel", **extra}
    if thread_ts:
        ev["thread_ts"] = thread_ts
    return ev


def mention_event(channel: str, user: str, text: str, **extra: Any) -> dict[str, Any]:
    return {**message_event(channel, user, text, **extra), "type": "app_mention"}


def event_body(event: dict[str, Any]) -> dict[str, Any]:
    """An Events API ``event_callback`` envelope around ``event``."""
    return {"token": "legacy", "team_id": TEAM_ID, "api_app_id": "A0L4TEST", "type": "event_callback",
            "event_id": f"Ev{next(_ids):08d}", "event_time": int(time.time()), "event": event,
            "authorizations": [{"team_id": TEAM_ID, "user_id": "UBOT0001", "is_bot": True}]}


def block_action(action_id: str, value: str, *, user: str, channel: str, message_ts: str,
                 thread_ts: str | None = None) -> dict[str, Any]:
    """The payload of a click on a button in a bot message."""
    message = {"type": "message", "ts": message_ts, "bot_id": "BBOT0001"}
    if thread_ts:
        message["thread_ts"] = thread_ts
    return {"type": "block_actions", "team": {"id": TEAM_ID}, "user": {"id": user, "team_id": TEAM_ID},
            "api_app_id": "A0L4TEST", "trigger_id": f"trig-{next(_ids)}", "channel": {"id": channel},
            "container": {"type": "message", "message_ts": message_ts, "channel_id": channel},
            "message": message, "response_url": "http://127.0.0.1:9/unused",
            "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": value,
                         "action_ts": next_ts()}]}


def view_submission(view: dict[str, Any], user: str, values: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The payload of a modal's submission; ``values`` is ``{block_id: element state}``."""
    state = {"values": {block: {"value": element} for block, element in values.items()}}
    return {"type": "view_submission", "team": {"id": TEAM_ID}, "user": {"id": user, "team_id": TEAM_ID},
            "api_app_id": "A0L4TEST", "trigger_id": f"trig-{next(_ids)}",
            "view": {**view, "id": view.get("id", "V1"), "state": state}}


def slash_command(text: str, *, user: str, channel: str, response_url: str,
                  command: str = "/l4") -> dict[str, str]:
    return {"token": "legacy", "team_id": TEAM_ID, "channel_id": channel, "user_id": user,
            "command": command, "text": text, "response_url": response_url,
            "trigger_id": f"trig-{next(_ids)}", "api_app_id": "A0L4TEST"}


def encode(body: dict[str, Any], kind: str) -> tuple[bytes, str]:
    """The request body as Slack sends it: ``event`` JSON, ``interactive`` payload=…, ``command`` form."""
    if kind == "event":
        return json.dumps(body).encode(), "application/json"
    if kind == "interactive":
        return urlencode({"payload": json.dumps(body)}).encode(), "application/x-www-form-urlencoded"
    return urlencode(body).encode(), "application/x-www-form-urlencoded"


def post_signed(url: str, secret: str, body: dict[str, Any], kind: str = "event", *,
                signature: str | None = None, timestamp: int | None = None,
                headers: dict[str, str] | None = None) -> Reply:
    """POST ``body`` to ``url`` signed with ``secret`` (or with a given, e.g. wrong, ``signature``);
    ``headers`` adds some, e.g. Slack's ``X-Slack-Retry-Num`` of a redelivery."""
    data, ctype = encode(body, kind)
    ts = str(timestamp if timestamp is not None else int(time.time()))
    sig = signature or SignatureVerifier(secret).generate_signature(timestamp=ts, body=data.decode())
    req = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": ctype, "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return Reply(resp.status, resp.read())
    except urllib.error.HTTPError as exc:
        return Reply(exc.code, exc.read())
