"""Safe text for Slack mrkdwn: escaping of log text and cutting to Block Kit's limits.

Slack reads ``<…>`` as links and mentions (``<!channel>``, ``<@U…>``) and ``&`` as the start of an
entity, so every piece of text that comes from a log, a user or a file goes through :func:`escape`
before it is put in a message. Cutting happens after escaping and never splits an entity.
"""
from __future__ import annotations

import re
from typing import Any

SECTION_LIMIT = 3000  # characters of a section's text
CONTEXT_LIMIT = 2000  # characters of one context element
HEADER_LIMIT = 150  # characters of a header block (plain text)
MAX_BLOCKS = 50  # blocks of a message
ELLIPSIS = "…"
_PARTIAL_ENTITY = re.compile(r"&[a-z]{0,3}$")


def escape(text: object) -> str:
    """``&``, ``<`` and ``>`` as entities: the text pings no one and links nothing."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def text_object(text: str) -> dict[str, Any]:
    """A Block Kit mrkdwn text object, verbatim: Slack auto-parses no @here, #channel or URL in it
    (the text is escaped besides), so log text can never ping anyone."""
    return {"type": "mrkdwn", "verbatim": True, "text": text}


def fit(text: str, limit: int = SECTION_LIMIT) -> str:
    """``text`` cut to at most ``limit`` characters (ending in "…" when cut), entities kept whole."""
    if len(text) <= limit:
        return text
    cut = _PARTIAL_ENTITY.sub("", text[: limit - len(ELLIPSIS)])
    return cut + ELLIPSIS


def code(text: object, limit: int = 300) -> str:
    """One raw line as inline code: escaped, backticks neutralised, at most ``limit`` characters."""
    line = str(text).replace("\n", " ").replace("`", "ˋ")
    if len(line) > limit:
        line = line[: limit - 1] + ELLIPSIS
    return f"`{escape(line)}`" if line else ""


def code_block(lines: list[str], limit: int = SECTION_LIMIT, line_limit: int = 500) -> str:
    """Raw lines as a code block that fits in ``limit`` characters (lines dropped from the end)."""
    out: list[str] = []
    used = 8  # the fences and their newlines
    for raw in lines:
        line = str(raw).replace("`", "ˋ")
        if len(line) > line_limit:
            line = line[: line_limit - 1] + ELLIPSIS
        line = escape(line)
        if used + len(line) + 1 > limit:
            break
        out.append(line)
        used += len(line) + 1
    return "```\n" + "\n".join(out) + "\n```" if out else ""


def plain(text: object, limit: int) -> str:
    """Text for a plain_text field (no escaping needed there): one line, cut to ``limit``."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + ELLIPSIS
