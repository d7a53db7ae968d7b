"""The ``/l4`` slash command: a table of subcommands, each ``handler(ctx, args)``.

A handler acknowledges the command first (``ctx.ack``; its text is an ephemeral reply) and then
may do slower work. Adding a subcommand is one entry in ``SUBCOMMANDS``.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slack_bolt import Ack, App, Respond
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.digest_blocks import DigestInputError, parse_days, post_digest
from bot.slack.client import slack_error
from bot.slack.diagnoser import AlreadyRunning
from bot.slack.mrkdwn import SECTION_LIMIT, escape, fit
from bot.slack.refs import explicit_job_ref
from bot.sources.netguard import safe_url

if TYPE_CHECKING:
    from bot.app import BotServices

log = logging.getLogger(__name__)


@dataclass
class SlashContext:
    bot: BotServices
    client: WebClient
    user_id: str
    channel_id: str
    ack: Ack
    respond: Respond


@dataclass(frozen=True)
class Subcommand:
    handler: Callable[[SlashContext, list[str]], None]
    usage: str
    summary: str


def _diagnose(ctx: SlashContext, args: list[str]) -> None:
    if len(args) != 1:
        ctx.ack(text="Usage: `/l4 diagnose <job ID or failure-report link>`")
        return
    ref = explicit_job_ref(args[0], ctx.bot.settings)
    if ref is None:
        ctx.ack(text=f"`{escape(args[0][:200])}` is neither a job ID nor a link to a known failure-report "
                     "host. Try `/l4 diagnose job-0042`.")
        return
    ctx.ack(text=f"Diagnosing *{escape(ref)}*; the answer goes in a thread in this channel.")
    try:
        parent = ctx.client.chat_postMessage(
            channel=ctx.channel_id, text=f"<@{ctx.user_id}> asked me to diagnose *{escape(ref)}*.")
        outcome = ctx.bot.diagnoser.request(ref, ctx.channel_id, str(parent["ts"]), ctx.user_id)
    except (SlackApiError, SlackClientError) as exc:
        why = slack_error(exc)
        absent = why in ("not_in_channel", "channel_not_found")
        hint = " Invite me with `/invite @L4` first." if absent else ""
        ctx.respond(text=f"I could not post in this channel ({escape(why)}).{hint}", replace_original=False)
        return
    if isinstance(outcome, AlreadyRunning):
        log.info("%s was already being diagnosed", safe_url(ref) if "://" in ref else ref)


def _patterns(ctx: SlashContext, args: list[str]) -> None:
    per_category, recent = ctx.bot.knowledge.patterns_overview()
    lines = [f"*{sum(per_category.values())} fault patterns* in the knowledge base:"]
    lines += [f"• `{escape(c)}`: {n}" for c, n in sorted(per_category.items())]
    if recent:
        lines.append("*Confirmed most recently:*")
        lines += [f"• *{escape(p.title)}* (`{escape(p.category)}`, `{escape(p.id)}`) by "
                  f"{escape(p.created_by)}, {p.created_at:%Y-%m-%d}" for p in recent]
    else:
        lines.append("No pattern has been confirmed from a diagnosis yet.")
    ctx.ack(text=fit("\n".join(lines), SECTION_LIMIT))


def _digest(ctx: SlashContext, args: list[str]) -> None:
    try:
        days = parse_days(args[0] if args else "")
    except DigestInputError as exc:
        ctx.ack(text=f"{escape(str(exc))}. Usage: `/l4 digest [days]`")
        return
    ctx.ack(text=f"Building the digest of the last {days} days; it goes in this channel.")
    try:
        post_digest(ctx.client, ctx.channel_id, ctx.bot.knowledge.digest(days))
    except (SlackApiError, SlackClientError) as exc:
        why = slack_error(exc)
        ctx.respond(text=f"I could not post the digest here ({escape(why)}).", replace_original=False)
    except Exception as exc:  # noqa: BLE001 - one line for the user, the trace in the bot's log
        log.exception("digest failed")
        ctx.respond(text=f"The digest failed: {escape(type(exc).__name__)}.", replace_original=False)


def _help(ctx: SlashContext, args: list[str]) -> None:
    lines = ["*L4 diagnoses failed training jobs from their logs.*",
             "Paste a job ID or a failure-report link in a channel I'm in, or mention me with one; "
             "the diagnosis appears in the thread. SREs confirm root causes with the *Confirm* button.",
             *[f"• `/l4 {s.usage}`: {s.summary}" for s in SUBCOMMANDS.values()]]
    ctx.ack(text="\n".join(lines))


SUBCOMMANDS: dict[str, Subcommand] = {
    "diagnose": Subcommand(_diagnose, "diagnose <job>", "diagnose a job (ID or failure-report link)"),
    "patterns": Subcommand(_patterns, "patterns", "what the knowledge base knows"),
    "digest": Subcommand(_digest, "digest [days]", "recurring faults and repeat offenders (7 days)"),
    "help": Subcommand(_help, "help", "this help"),
}


def run_command(ctx: SlashContext, text: str) -> None:
    words = (text or "").split()
    name = words[0].lower() if words else "help"
    sub = SUBCOMMANDS.get(name)
    if sub is None:
        ctx.ack(text=f"Unknown command `{escape(name[:40])}`. Try `/l4 help`.")
        return
    sub.handler(ctx, words[1:])


def register(app: App, bot: BotServices, command: str = "/l4") -> None:
    @app.command(command)
    def on_command(ack: Ack, respond: Respond, command: dict[str, Any], client: WebClient) -> None:
        ctx = SlashContext(bot, client, command.get("user_id", ""), command.get("channel_id", ""),
                           ack, respond)
        run_command(ctx, command.get("text") or "")
