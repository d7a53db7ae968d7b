"""Message and mention listeners: a job ID or failure-report link in a message starts a diagnosis.

Ignored: the bot's own messages, other bots' messages and message subtypes (edits, joins,
deletions…; only ``thread_broadcast`` and ``file_share`` are people writing), so the bot never
answers itself. A reply in a thread that names a job already diagnosed in that thread starts
nothing (people are discussing the answer); mentioning the bot asks again. A message that mentions
the bot is left to the ``app_mention`` listener, which also answers when no job is named.
The requests are written (``Diagnoser.accept``) in listener middleware, which Bolt runs before it
acknowledges the event; the listeners, run after the acknowledgement, post in the threads.
"""
from __future__ import annotations

from collections.abc import Callable
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


def _accept(bot: BotServices, event: dict[str, Any], refs: list[str]) -> list[Any]:
    """The durable requests of ``refs`` (written now, before Slack is acknowledged)."""
    thread_ts = event.get("thread_ts") or event["ts"]
    return [bot.diagnoser.accept(ref, event["channel"], thread_ts, event.get("user")) for ref in refs]


def _announce(bot: BotServices, event: dict[str, Any], context: BoltContext) -> None:
    for outcome in context.get(ACCEPTED) or []:
        bot.diagnoser.announce(outcome, event.get("user"))


ACCEPTED = "l4_accepted"  # the context key of the requests accepted before the ack


def register(app: App, bot: BotServices) -> None:
    # The middleware runs before Bolt acknowledges the event; the listeners after (in a thread).
    def accept_message(event: dict[str, Any], context: BoltContext, next: Callable[[], None]) -> None:
        if not _from_a_person(event, context.bot_user_id):
            return next()
        text = event.get("text") or ""
        if context.bot_user_id and f"<@{context.bot_user_id}>" in text:
            return next()  # the app_mention listener answers
        refs = find_job_refs(text, bot.settings, passive=True)
        thread = event.get("thread_ts")
        if thread and thread != event.get("ts"):  # a reply: people discussing a diagnosis already given
            refs = [r for r in refs if not bot.knowledge.diagnosed_in_thread(event["channel"], thread, r)]
        context[ACCEPTED] = _accept(bot, event, refs)
        return next()

    def accept_mention(event: dict[str, Any], context: BoltContext, next: Callable[[], None]) -> None:
        if _from_a_person(event, context.bot_user_id):
            refs = find_job_refs(event.get("text") or "", bot.settings)
            context["l4_mention_refs"] = refs
            context[ACCEPTED] = _accept(bot, event, refs)
        return next()

    @app.event("message", middleware=[accept_message])
    def on_message(event: dict[str, Any], context: BoltContext) -> None:
        _announce(bot, event, context)

    @app.event("app_mention", middleware=[accept_mention])
    def on_mention(event: dict[str, Any], context: BoltContext, client: WebClient) -> None:
        if "l4_mention_refs" not in context:
            return  # not from a person
        if context["l4_mention_refs"]:
            _announce(bot, event, context)
            return
        text, blocks = note_message(MENTION_HELP)
        client.chat_postMessage(channel=event["channel"], thread_ts=event.get("thread_ts") or event["ts"],
                                text=text, blocks=blocks)
