"""Message and mention listeners: a job ID or failure-report link in a message starts a diagnosis.

Ignored: the bot's own messages, other bots' messages and message subtypes (edits, joins,
deletions…; only ``thread_broadcast`` and ``file_share`` are people writing), so the bot never
answers itself. A reply in a thread that names a job already diagnosed in that thread starts
nothing (people are discussing the answer); mentioning the bot asks again. A message that mentions
the bot is left to the ``app_mention`` listener, which also answers when no job is named.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from slack_bolt import App, BoltContext
from slack_sdk import WebClient

from bot.slack.blocks import note_message
from bot.slack.refs import find_job_refs

if TYPE_CHECKING:
    from bot.app import BotServices

MENTION_HELP = ("Give me a job ID (like `job-0042`) or a failure-report link and I'll diagnose it "
                "in this thread. `/l4 help` lists everything I can do.")


PERSON_SUBTYPES = {None, "thread_broadcast", "file_share"}  # what people write; edits, joins… are not


def _from_a_person(event: dict[str, Any], bot_user_id: str | None) -> bool:
    return (event.get("subtype") in PERSON_SUBTYPES and not event.get("bot_id") and bool(event.get("user"))
            and event.get("user") != bot_user_id)


def _start(bot: BotServices, event: dict[str, Any], refs: list[str]) -> None:
    thread_ts = event.get("thread_ts") or event["ts"]
    for ref in refs:
        bot.diagnoser.request(ref, event["channel"], thread_ts, event.get("user"))


def register(app: App, bot: BotServices) -> None:
    @app.event("message")
    def on_message(event: dict[str, Any], context: BoltContext) -> None:
        if not _from_a_person(event, context.bot_user_id):
            return
        text = event.get("text") or ""
        if context.bot_user_id and f"<@{context.bot_user_id}>" in text:
            return  # the app_mention listener answers
        refs = find_job_refs(text, bot.settings, passive=True)
        thread = event.get("thread_ts")
        if thread and thread != event.get("ts"):  # a reply: people discussing a diagnosis already given
            refs = [r for r in refs if not bot.knowledge.diagnosed_in_thread(event["channel"], thread, r)]
        if refs:
            _start(bot, event, refs)

    @app.event("app_mention")
    def on_mention(event: dict[str, Any], context: BoltContext, client: WebClient) -> None:
        if not _from_a_person(event, context.bot_user_id):
            return
        refs = find_job_refs(event.get("text") or "", bot.settings)
        if refs:
            _start(bot, event, refs)
            return
        text, blocks = note_message(MENTION_HELP)
        client.chat_postMessage(channel=event["channel"], thread_ts=event.get("thread_ts") or event["ts"],
                                text=text, blocks=blocks)
