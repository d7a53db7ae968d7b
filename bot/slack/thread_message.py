"""The bot's one message in a request's thread: "Diagnosing …", its progress, then the answer.

Progress edits are best effort: a Slack error or a timeout is logged and the analysis goes on. The
final answer is tried in ever shorter forms (the full summary, the summary without log examples,
one line with the diagnosis ID and the buttons, plain text), a few rounds apart, and posted as a new
reply when the progress message is gone. A "Diagnosing …" post whose answer was lost (a timeout) is
found again in the thread rather than posted twice.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack.blocks import error_message, progress_message, summary_actions, summary_message
from bot.slack.client import slack_error
from bot.slack.mrkdwn import SECTION_LIMIT, escape, fit, text_object
from engine.model import Diagnosis

log = logging.getLogger(__name__)
UPDATE_EVERY_SECONDS = 2.0  # chat.update is rate limited (Tier 3): at most one progress edit per this
FINAL_ROUNDS = 3  # tries of the whole list of forms of the answer
FINAL_PAUSE_SECONDS = 1.0  # between rounds (doubling)
GONE = ("message_not_found", "cant_update_message", "edit_window_closed")

Message = tuple[str, list[dict[str, Any]]]


class ThreadMessage:
    def __init__(self, client: WebClient, channel: str, thread_ts: str, label: str, ts: str | None = None,
                 on_posted: Callable[[str], None] | None = None,
                 give_up: threading.Event | None = None) -> None:
        self.client, self.channel, self.thread_ts, self.label = client, channel, thread_ts, label
        self.ts = ts
        self.give_up = give_up  # set: one round of the answer's forms only (the bot is stopping)
        self.on_posted = on_posted or (lambda _ts: None)
        self.phase_name: str | None = None
        self.last = 0.0
        self.unsure = False  # a post got no answer: it may have gone through (a stray to clean up)

    # -- the progress message ----------------------------------------------------------------------
    def post(self, step: str | None = None) -> str | None:
        """Post "Diagnosing …" (once: a post whose answer timed out is looked up); its ts, or None
        when Slack cannot be reached now (the answer is then posted as a new reply)."""
        if self.ts is not None:
            return self.ts
        text, blocks = progress_message(self.label, step)
        try:
            posted = self.client.chat_postMessage(channel=self.channel, thread_ts=self.thread_ts, text=text,
                                                  blocks=blocks)
            self._posted(str(posted["ts"]))
        except Exception as exc:  # noqa: BLE001 - timeouts and network errors too: the request lives on
            log.warning("cannot post the progress message of %s: %s", self.label, slack_error(exc))
            self.unsure = True
            found = self._find_posted()
            if found:
                self._posted(found[-1])
        return self.ts

    def _posted(self, ts: str) -> None:
        self.ts = ts
        try:
            self.on_posted(ts)
        except Exception:  # noqa: BLE001 - recording it is for a restart; the work goes on
            log.warning("cannot record the progress message of %s", self.label, exc_info=True)

    def _find_posted(self) -> list[str]:
        """The bot's "Diagnosing <label>…" messages in the thread (posts that went through unanswered)."""
        wanted = progress_message(self.label)[0]
        try:
            replies = self.client.conversations_replies(channel=self.channel, ts=self.thread_ts, limit=200)
        except Exception as exc:  # noqa: BLE001
            log.warning("cannot look for the progress message of %s: %s", self.label, slack_error(exc))
            return []
        return [str(m["ts"]) for m in replies.get("messages") or []
                if m.get("bot_id") and str(m.get("text") or "") == wanted and m.get("ts")]

    def step(self, text: str) -> None:
        """Say ``text`` under "Diagnosing …" now (e.g. resumed after a restart)."""
        self._edit(*progress_message(self.label, text), force=True)

    def phase(self, name: str) -> None:
        self.phase_name = name
        if name in ("parsing", "analyzing"):  # the long phases; the others pass in a blink
            self._edit(*progress_message(self.label, name), force=True)

    def fetched(self, done: int, total: int | None) -> None:
        first = self.phase_name != "fetching"
        self.phase_name = "fetching"
        self._edit(*progress_message(self.label, "fetching", done, total), force=first)

    def files(self, done: int, total: int, _bytes: int) -> None:
        self._edit(*progress_message(self.label, "parsing", done, total), force=done == total)

    def _edit(self, text: str, blocks: list, force: bool = False) -> None:
        now = time.monotonic()
        if self.ts is None or (not force and now - self.last < UPDATE_EVERY_SECONDS):
            return
        self.last = now
        try:
            self.client.chat_update(channel=self.channel, ts=self.ts, text=text, blocks=blocks)
        except Exception as exc:  # noqa: BLE001 - progress is best effort: timeouts included
            log.warning("cannot update the progress of %s: %s", self.label, slack_error(exc))

    # -- the answer ----------------------------------------------------------------------------------
    def final(self, forms: list[Message]) -> bool:
        """Replace the progress message with the first of ``forms`` Slack takes; True once one is
        shown. Rounds apart, every form is tried again (Slack's 500s pass)."""
        pause = FINAL_PAUSE_SECONDS
        for round_no in range(FINAL_ROUNDS):
            if round_no:
                if self.give_up is not None and self.give_up.is_set():
                    break
                time.sleep(pause)
                pause *= 2
            for text, blocks in forms:
                if self._show(text, blocks):
                    if self.unsure:
                        self._settle_strays()
                    return True
        log.error("cannot post the answer for %s in %s/%s", self.label, self.channel, self.thread_ts)
        return False

    def _settle_strays(self) -> None:
        """A "Diagnosing …" post that went through although its answer was lost points to the answer."""
        for ts in self._find_posted():
            if ts != self.ts:
                text = f"The answer for {escape(self.label)} is in this thread."
                try:
                    self.client.chat_update(channel=self.channel, ts=ts, text=text,
                                            blocks=[{"type": "section", "text": text_object(text)}])
                except Exception as exc:  # noqa: BLE001 - cosmetic
                    log.warning("cannot settle a stray progress message of %s: %s", self.label,
                                slack_error(exc))

    def _show(self, text: str, blocks: list) -> bool:
        try:
            if self.ts is None:
                self.unsure = True  # if this answer is lost, the message may still be there
                posted = self.client.chat_postMessage(channel=self.channel, thread_ts=self.thread_ts,
                                                      text=text, blocks=blocks)
                self._posted(str(posted["ts"]))
            else:
                self.client.chat_update(channel=self.channel, ts=self.ts, text=text, blocks=blocks)
            return True
        except SlackApiError as exc:
            log.warning("cannot post the answer for %s: %s", self.label, slack_error(exc))
            if slack_error(exc) in GONE:
                self.ts = None  # the progress message was deleted: the next form is a new reply
        except Exception as exc:  # noqa: BLE001 - a timeout or network error: the next form, or round
            log.warning("cannot post the answer for %s: %s", self.label, slack_error(exc))
        return False


def summary_forms(d: Diagnosis, diagnosis_id: int) -> list[Message]:
    """The summary of a stored diagnosis, longest first; every form has its ID and the buttons."""
    short = dataclasses.replace(
        d, events=[dataclasses.replace(e, examples=[]) for e in d.events[:3]],
        matches=[dataclasses.replace(m, evidence=m.evidence[:1]) for m in d.matches[:1]], report=None)
    if d.status == "matched" and d.matches:
        lead = f"known fault {d.matches[0].title} ({d.matches[0].category})"
    else:
        lead = "top event: " + (d.events[0].template if d.events else "no failure-indicating events")
    line = fit(f"*L4 diagnosis #{diagnosis_id} of {escape(d.job_id)}*: {escape(lead)} "
               "(the full report is one click away)", SECTION_LIMIT)
    plain = fit(escape(f"L4 diagnosis #{diagnosis_id} of {d.job_id}: {lead}"), SECTION_LIMIT)
    return [summary_message(d, diagnosis_id), summary_message(short, diagnosis_id),
            (plain, [{"type": "section", "text": text_object(line)}, summary_actions(diagnosis_id)]),
            (plain, [])]


def error_forms(label: str, reason: str) -> list[Message]:
    """One line saying why ``label`` could not be diagnosed, then the same as plain text."""
    text, blocks = error_message(label, reason)
    return [(text, blocks), (text, [])]
