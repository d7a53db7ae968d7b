"""Button and modal listeners of the summary: Confirm root cause, Not the cause, Full report.

Buttons carry only the diagnosis ID; everything else is read from the knowledge base. Answers for
one person (refusals, errors) are ephemeral; verdicts are posted in the diagnosis' thread.
"""
from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from slack_bolt import Ack, App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.render_html import render_html
from bot.slack.blocks import ACTION_CONFIRM, ACTION_REJECT, ACTION_REPORT, note_message
from bot.slack.client import slack_error
from bot.slack.knowledge import StoredDiagnosis
from bot.slack.modals import (
    CALLBACK_CONFIRM,
    confirm_view,
    metadata_diagnosis_id,
    read_confirm,
    signature_choices,
)
from bot.slack.mrkdwn import escape
from bot.slack.uploads import OutFile, upload_files
from engine.model import diagnosis_from_dict
from kb import KbError

if TYPE_CHECKING:
    from bot.app import BotServices

log = logging.getLogger(__name__)


def _where(body: dict[str, Any], stored: StoredDiagnosis | None) -> tuple[str | None, str | None]:
    """The thread of the diagnosis: as stored, else where the clicked message is."""
    if stored is not None and stored.channel and stored.thread_ts:
        return stored.channel, stored.thread_ts
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
    msg = body.get("message") or {}
    return channel, msg.get("thread_ts") or msg.get("ts")


def _tell(client: WebClient, body: dict[str, Any], text: str, thread_ts: str | None = None) -> None:
    """An ephemeral line for the person who clicked."""
    channel = (body.get("channel") or {}).get("id") or (body.get("container") or {}).get("channel_id")
    user = (body.get("user") or {}).get("id")
    if not channel or not user:
        return
    try:
        client.chat_postEphemeral(channel=channel, user=user, text=text, thread_ts=thread_ts)
    except (SlackApiError, SlackClientError) as exc:
        log.warning("cannot answer %s: %s", user, exc.__class__.__name__)


def _post(client: WebClient, channel: str | None, thread_ts: str | None, text: str) -> None:
    if channel:
        t, blocks = note_message(text)
        client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=t, blocks=blocks)


def _diagnosis_id(action: dict[str, Any]) -> int | None:
    value = str(action.get("value") or "")
    return int(value) if value.isdigit() else None


def _load(bot: BotServices, client: WebClient, body: dict[str, Any], action: dict[str, Any]
          ) -> StoredDiagnosis | None:
    did = _diagnosis_id(action)
    try:
        if did is None:
            raise KbError("this button does not name a diagnosis")
        return bot.knowledge.diagnosis(did)
    except KbError as exc:
        _tell(client, body, f"Sorry: {escape(exc)}")
        return None


def _who(user: str) -> str:
    """A stored user as a mention when it is a Slack user ID, else as escaped text."""
    return f"<@{user}>" if re.fullmatch(r"[UW][A-Z0-9]{2,}", user) else escape(user)


def _error_field(message: str) -> str:
    """The modal field a knowledge-base error is about ("<pattern id>: title must be …")."""
    low = message.lower()
    if "pattern id must be" in low or low.startswith("already confirmed"):
        return "title"  # the id is made from the title
    m = re.search(r"\b(title|category|remediation) must\b", low)
    return m.group(1) if m else "events"


def register(app: App, bot: BotServices) -> None:
    @app.action(ACTION_CONFIRM)
    def on_confirm(ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient) -> None:
        ack()
        user = body["user"]["id"]
        if not bot.policy.may_confirm(client, user):
            _tell(client, body, bot.policy.refusal())
            return
        stored = _load(bot, client, body, action)
        if stored is None:
            return
        channel, thread_ts = _where(body, stored)
        job = escape(stored.data.get("job_id") or "")
        if stored.matched_pattern_id:
            try:
                pattern, first = bot.knowledge.confirm_match(stored.id, user)
            except KbError as exc:
                _tell(client, body, f"Sorry: {escape(exc)}")
                return
            if first is not None:
                _tell(client, body, f"{_who(first)} already confirmed the known fault "
                                    f"*{escape(pattern.title)}* for this diagnosis; it is recorded once.",
                      thread_ts)
                return
            _post(client, channel, thread_ts,
                  f":white_check_mark: <@{user}> confirmed that *{job}* failed with the known fault "
                  f"*{escape(pattern.title)}* (pattern `{escape(pattern.id)}`).")
            return
        done = bot.knowledge.confirmation(stored.id)
        if done is not None:
            _tell(client, body, f"{_who(done[1])} already archived this root cause as pattern "
                                f"`{escape(done[0])}`; `/l4 patterns` lists it.")
            return
        if not signature_choices(stored.data):
            _tell(client, body, "This diagnosis found no events to build a signature from; "
                                "confirm a root cause on a diagnosis that shows its events.")
            return
        try:
            client.views_open(trigger_id=body["trigger_id"],
                              view=confirm_view(stored.data, stored.id, channel, thread_ts))
        except (SlackApiError, SlackClientError) as exc:  # e.g. expired_trigger_id after a slow lookup
            why = slack_error(exc)
            _tell(client, body, f"Sorry, the form could not be opened ({escape(why)}); click Confirm again.")

    @app.view(CALLBACK_CONFIRM)
    def on_confirm_submit(ack: Ack, body: dict[str, Any], view: dict[str, Any], client: WebClient) -> None:
        user = body["user"]["id"]
        if not bot.policy.may_confirm(client, user):
            ack(response_action="errors", errors={"title": "Only SREs can confirm a root cause."})
            return
        did = metadata_diagnosis_id(view)
        try:
            if did is None:
                raise KbError("this form does not name a diagnosis")
            stored = bot.knowledge.diagnosis(did)
            form = read_confirm(view, stored.data)
            if not form.events:
                ack(response_action="errors", errors={"events": "Tick at least one event."})
                return
            pattern = bot.knowledge.confirm(form, user)
        except KbError as exc:
            msg = str(exc).splitlines()[0] if str(exc) else "invalid input"
            ack(response_action="errors", errors={_error_field(msg): msg[:150]})
            return
        ack()
        job = escape(stored.data.get("job_id") or "")
        _post(client, form.channel or stored.channel, form.thread_ts or stored.thread_ts,
              f":white_check_mark: <@{user}> confirmed the root cause of *{job}*: "
              f"*{escape(pattern.title)}* (`{escape(pattern.category)}`). Archived as pattern "
              f"`{escape(pattern.id)}`: the next job that shows these events is named with it at once.")

    @app.action(ACTION_REJECT)
    def on_reject(ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient) -> None:
        ack()
        user = body["user"]["id"]
        stored = _load(bot, client, body, action)
        if stored is None:
            return
        try:
            verdict = bot.knowledge.reject(stored.id, user)
        except KbError as exc:
            _tell(client, body, f"Sorry: {escape(exc)}")
            return
        channel, thread_ts = _where(body, stored)
        if verdict.repeated:
            _tell(client, body, "You already said this is not the cause; it is recorded.", thread_ts)
            return
        job = escape(stored.data.get("job_id") or "")
        text = f":x: <@{user}> says this is not the cause of *{job}*; feedback recorded."
        if verdict.pattern_id:
            text += (f" Pattern `{escape(verdict.pattern_id)}` is now flagged for review." if verdict.flagged
                     else f" (against pattern `{escape(verdict.pattern_id)}`)")
        _post(client, channel, thread_ts, text)

    @app.action(ACTION_REPORT)
    def on_report(ack: Ack, body: dict[str, Any], action: dict[str, Any], client: WebClient) -> None:
        ack()
        stored = _load(bot, client, body, action)
        if stored is None:
            return
        channel, thread_ts = _where(body, stored)
        if not channel:
            return
        job = str(stored.data.get("job_id") or "job")
        try:
            html = render_html(diagnosis_from_dict(stored.data), diagnosis_id=stored.id)
        except Exception:  # noqa: BLE001 - one line for the user, the trace in the bot's log
            log.exception("report of diagnosis %s failed", stored.id)
            _tell(client, body, "Sorry, the report could not be made; the bot's log has the details.",
                  thread_ts)
            return
        try:
            upload_files(client, channel, thread_ts,
                         [OutFile(f"l4-{_safe_name(job)}-{stored.id}.html", html, f"L4 report: {job}")])
        except (SlackApiError, SlackClientError) as exc:
            why = slack_error(exc)
            _tell(client, body, f"Sorry, the report could not be uploaded ({escape(why)}).", thread_ts)


def _safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)[:80] or "job"
