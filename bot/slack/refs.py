"""What in a message names a job: job IDs and failure-report links.

Slack sends links as ``<url|label>`` or ``<url>``, user mentions as ``<@U…>``. A URL counts when its
host is one of ``settings.report_hosts``; a token counts as a job ID when it fully matches
``settings.job_id_pattern`` or is the name of a folder under a local ``settings.log_root``.
"""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

from bot.config import Settings
from bot.sources.netguard import host_allowed

_ANGLE = re.compile(r"<([^<>]*)>")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SAFE_FOLDER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_REFS = 5  # jobs started by one message


def is_report_link(url: str, report_hosts: list[str]) -> bool:
    """True when ``url`` is an http(s) link to one of the configured failure-report hosts, with the
    fetcher's own host rule (``bot.sources.netguard.host_allowed``: exact names, ``*.domain``, IPs)."""
    try:
        parsed = urlparse(url)
        host = parsed.hostname or ""
    except ValueError:
        return False
    if parsed.scheme not in ("http", "https") or not host:
        return False
    return host_allowed(host, Settings(report_hosts=report_hosts))


def _split_links(text: str) -> tuple[list[str], str]:
    """The URLs of Slack's ``<url|label>`` / ``<url>`` markup, and the text with all markup removed."""
    urls: list[str] = []

    def take(m: re.Match[str]) -> str:
        inner = m.group(1)
        target = inner.split("|", 1)[0]
        if target[:1] in ("@", "#", "!"):  # mentions, channels, special commands
            return " "
        if "://" in target:
            urls.append(target.replace("&amp;", "&"))
            return " "
        return " "

    return urls, _ANGLE.sub(take, text)


def _is_local_root(root: str) -> bool:
    return "://" not in root or root.startswith("file://")


def _is_local_folder(root: str, name: str) -> bool:
    if not _is_local_root(root):
        return False
    base = Path(root[len("file://"):] if root.startswith("file://") else root)
    return bool(_SAFE_FOLDER.match(name)) and name not in (".", "..") and (base / name).is_dir()


def find_job_refs(text: str, settings: Settings, *, passive: bool = False) -> list[str]:
    """Job IDs and failure-report links in a message, in order of appearance, without repeats.

    ``passive``: the message was not addressed to the bot, so with a local log root only job IDs
    whose folder exists count (chat that merely looks like a job ID starts nothing)."""
    urls, rest = _split_links(text or "")
    refs = [u for u in urls if is_report_link(u, settings.report_hosts)]
    pattern = re.compile(settings.job_id_pattern)
    local = _is_local_root(settings.log_root)
    for token in _TOKEN.findall(rest):
        token = token.rstrip(".")  # "see job-0042." ends a sentence
        if not token:
            continue
        exists = local and _is_local_folder(settings.log_root, token)
        if exists or (pattern.fullmatch(token) and not (passive and local)):
            refs.append(token)
    return list(dict.fromkeys(refs))[:MAX_REFS]


def explicit_job_ref(arg: str, settings: Settings) -> str | None:
    """What ``/l4 diagnose ARG`` names: a failure-report link, or a job ID (a bare name: the bot never
    reads folders by path); None when ``arg`` is neither."""
    arg = (arg or "").strip()
    urls, rest = _split_links(arg)
    if urls:
        return urls[0] if is_report_link(urls[0], settings.report_hosts) else None
    rest = rest.strip()
    if "://" in rest:
        return rest if is_report_link(rest, settings.report_hosts) else None
    return rest if _SAFE_FOLDER.match(rest) and rest not in (".", "..") else None
