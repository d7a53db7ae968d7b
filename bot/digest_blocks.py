"""The recurring-fault digest for people: Block Kit for Slack, plain text for the CLI, posting
(blocks + the pattern-counts plot in the message's thread) and parsing the days of ``/l4 digest [days]``.

Block Kit limits are kept: at most 50 blocks, at most 3000 characters of text a section, every
piece of stored text escaped for mrkdwn (``&``, ``<``, ``>``), so no log text can ping a channel.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.slack.mrkdwn import HEADER_LIMIT, MAX_BLOCKS, SECTION_LIMIT, escape, fit, plain, text_object
from kb.digest import MAX_DAYS, Digest

DEFAULT_DAYS = 7
PLOT_FILENAME = "l4-digest-patterns.png"
_TREND = {"new": "new", "up": "↑", "down": "↓", "same": "="}
_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]+$")


class DigestInputError(ValueError):
    """Bad input to a digest command (one line, safe to show)."""


# ---- small formatting helpers ------------------------------------------------------------------

def _section_block(text: str) -> dict[str, Any]:
    """A section of mrkdwn, verbatim: Slack auto-parses no mention or link in it."""
    return {"type": "section", "text": text_object(text)}


def esc(text: object) -> str:
    """Text made safe for Slack mrkdwn: &, < and > escaped, on one line."""
    return escape(" ".join(str(text).split()))


def _code(text: object) -> str:
    return "`" + esc(text).replace("`", "'") + "`"


def duration(seconds: float | None) -> str:
    """``45 s``, ``12 min``, ``3.5 h``, ``1.2 d`` (``-`` when unknown)."""
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _n(count: int, one: str, many: str | None = None) -> str:
    """``1 job``, ``3 jobs``."""
    return f"{count} {one if count == 1 else many or one + 's'}"


def _day(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d") if t else "-"


def _jobs(jobs: list[str], limit: int = 5) -> list[str]:
    return jobs[:limit] + ([f"+{len(jobs) - limit} more"] if len(jobs) > limit else [])


def parse_days(text: str | None) -> int:
    """Days of a digest from what a user typed ('' → 7). Raises DigestInputError."""
    raw = (text or "").strip()
    if not raw:
        return DEFAULT_DAYS
    if not re.fullmatch(r"\d{1,4}", raw):
        raise DigestInputError(f"days must be a whole number from 1 to {MAX_DAYS}, got {plain(raw, 20)!r}")
    days = int(raw)
    if not 1 <= days <= MAX_DAYS:
        raise DigestInputError(f"days must be a whole number from 1 to {MAX_DAYS}, got {days}")
    return days


# ---- lines shared by Block Kit and text ------------------------------------------------------------

def _headline(dg: Digest) -> str:
    return f"L4 digest: the last {dg.days} day{'s' if dg.days != 1 else ''}"


def _summary(dg: Digest) -> str:
    return (f"{dg.start:%Y-%m-%d %H:%M} → {dg.end:%Y-%m-%d %H:%M} UTC · {_n(dg.jobs, 'job')} diagnosed "
            f"({dg.previous_jobs} in the {dg.days} days before) · "
            f"{_n(dg.diagnoses, 'diagnosis', 'diagnoses')} · median request→diagnosis "
            f"{duration(dg.median_to_diagnosis)} · request→confirmation "
            f"{duration(dg.median_to_confirmation)} "
            f"({dg.confirmations} confirmed)")


def _pattern_line(p: Any, code: Callable[[object], str], text: Callable[[object], str], bold: str) -> str:
    trend = _TREND.get(p.trend, p.trend)
    change = "new" if p.trend == "new" else f"{trend} from {p.previous}"
    sev = f", {text(p.severity)}" if p.severity else ""
    return (f"• {bold}{text(p.title)}{bold} ({code(p.pattern_id)}{sev}): {_n(p.count, 'job')} ({change}) "
            f"· first seen {_day(p.first_seen)}, "
            f"last {_day(p.last_seen)} · jobs: {', '.join(text(j) for j in _jobs(p.jobs))}")


def _offender_line(o: Any, code: Callable[[object], str], text: Callable[[object], str], bold: str) -> str:
    pats = ", ".join(code(p) for p in o.patterns[:4]) or "no known pattern"
    return (f"• {code(o.node)}: {bold}{o.recommendation}{bold} ({text(o.reason)}) · "
            f"{len(o.jobs)} jobs: {', '.join(text(j) for j in _jobs(o.jobs))} · max score {o.max_score:.2f} "
            f"· patterns: {pats}")


# ---- Block Kit ----------------------------------------------------------------------------------

LINE_CHARS = 600  # one list item in a section


def _section(title: str, lines: list[str], total: int, noun: str, empty: str) -> dict[str, Any]:
    """One section (at most SECTION_LIMIT characters): a bold title, as many lines as fit, and how
    many of ``total`` items were left out."""
    text = f"*{title}*"
    if not lines:
        text += "\n" + empty
    shown = 0
    for line in lines:
        line = fit(line, LINE_CHARS)  # lines are escaped already: never cut inside an entity
        if len(text) + 1 + len(line) > SECTION_LIMIT - 80:
            break
        text += "\n" + line
        shown += 1
    if total > shown:
        text += f"\n_…and {total - shown} more {noun}_"
    return _section_block(text)


def _backlog_line(b: Any) -> str:
    label = esc(b.job_id).replace("|", "¦")
    where = (f"<{b.link}|{label}>" if b.link and _SAFE_ID.match(b.slack_channel or "")
             and _SAFE_ID.match(b.slack_thread_ts or "") else f"{_code(b.job_id)} (not posted in Slack)")
    pat = f"matched {_code(b.pattern_id)}" if b.pattern_id else "engine only, no known pattern"
    return f"• {where} · diagnosis {b.diagnosis_id} · {pat} · {_day(b.diagnosed_at)}"


def _backlog_title(dg: Digest) -> str:
    return (f"{_n(dg.backlog_total, 'unconfirmed job')} ({dg.backlog_in_window} from this window), "
            "oldest first")


def digest_blocks(dg: Digest) -> list[dict[str, Any]]:
    """Block Kit for a digest (at most 50 blocks)."""
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": plain(_headline(dg), HEADER_LIMIT)}},
        {"type": "context", "elements": [text_object(esc(_summary(dg)))]},
        {"type": "divider"},
    ]
    blocks.append(_section("Recurring fault patterns",
                           [_pattern_line(p, _code, esc, "*") for p in dg.patterns], dg.patterns_total,
                           "patterns", "No diagnosis matched a known fault pattern."))
    blocks.append(_section(f"Repeat-offender nodes (in {dg.offender_min_jobs} or more failed jobs)",
                           [_offender_line(o, _code, esc, "*") for o in dg.offenders], dg.offenders_total,
                           "nodes", f"No node was implicated in {dg.offender_min_jobs} or more failed jobs."))
    blocks.append(_section(f"Waiting for a human: {_backlog_title(dg)}",
                           [_backlog_line(b) for b in dg.backlog], dg.backlog_total, "jobs",
                           "Nothing waits: every diagnosed job has an SRE's verdict."))
    blocks.append({"type": "context", "elements": [text_object(
        "Confirm or reject a diagnosis in its thread. Another window: `/l4 digest DAYS`.")]})
    return blocks[:MAX_BLOCKS]


def digest_fallback(dg: Digest) -> str:
    """The notification text of a digest message (Slack's ``text``)."""
    top = dg.patterns[0] if dg.patterns else None
    most = f"; most frequent: {esc(top.title)} ({_n(top.count, 'job')})" if top else ""
    return plain(f"{_headline(dg)}: {_n(dg.jobs, 'job')} diagnosed{most}; {dg.offenders_total} "
                f"repeat-offender nodes; {_n(dg.backlog_total, 'unconfirmed job')}", 3000)


# ---- plain text (CLI) ---------------------------------------------------------------------------

def digest_text(dg: Digest) -> str:
    """The digest as plain text for a terminal."""
    def plain(x: object) -> str:
        return " ".join(str(x).split())

    out = [_headline(dg), _summary(dg), "", "Recurring fault patterns:"]
    out += [_pattern_line(p, plain, plain, "") for p in dg.patterns] or ["  none"]
    if dg.patterns_total > len(dg.patterns):
        out.append(f"  …and {dg.patterns_total - len(dg.patterns)} more")
    out += ["", f"Repeat-offender nodes (in {dg.offender_min_jobs} or more failed jobs):"]
    out += [_offender_line(o, plain, plain, "") for o in dg.offenders] or ["  none"]
    if dg.offenders_total > len(dg.offenders):
        out.append(f"  …and {dg.offenders_total - len(dg.offenders)} more")
    out += ["", f"Waiting for a human: {_backlog_title(dg)}:"]
    for b in dg.backlog:
        pat = f"matched {b.pattern_id}" if b.pattern_id else "engine only, no known pattern"
        out.append(f"• {plain(b.job_id)} · diagnosis {b.diagnosis_id} · {pat} · "
                   f"{_day(b.diagnosed_at)}" + (f" · {b.link}" if b.link else ""))
    if not dg.backlog:
        out.append("  none")
    if dg.backlog_total > len(dg.backlog):
        out.append(f"  …and {dg.backlog_total - len(dg.backlog)} more")
    return "\n".join(out)


# ---- the plot, posting and the slash command ------------------------------------------------------

def digest_png(dg: Digest) -> bytes | None:
    """The pattern-counts-per-day plot, or None when no pattern occurred in either window."""
    if not any(sum(v) for v in dg.pattern_days.values()):
        return None
    from bot.plots import pattern_counts_png

    titles = {p.pattern_id: p.title for p in dg.patterns}
    return pattern_counts_png(dg.day_starts, dg.pattern_days, titles, window_start=dg.start)


def post_digest(client: Any, channel: str, dg: Digest) -> str:
    """Post the digest to ``channel`` (a slack_sdk WebClient) and attach the pattern-counts plot in
    its thread. Returns the message's ts. Slack errors propagate (slack_sdk.errors.SlackApiError)."""
    posted = client.chat_postMessage(channel=channel, text=digest_fallback(dg), blocks=digest_blocks(dg),
                                     unfurl_links=False, unfurl_media=False)
    ts = str(posted["ts"])
    png = digest_png(dg)
    if png is not None:
        client.files_upload_v2(channel=channel, thread_ts=ts, file=png, filename=PLOT_FILENAME,
                               title=f"Fault patterns per day, last {2 * dg.days} days")
    return ts
