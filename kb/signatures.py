"""Fault-pattern signatures: normalization, template -> regex, and validation.

A signature is a list of entries, each one of
  {"regex": "<RE2 regex>"}   matched anywhere in a raw log line
  {"template": "<Drain template>"}   "<*>" (or a mask such as "<NUM>") = a variable part
  {"literal": "<text>"}      plain substring
All are compiled to RE2 (linear-time: no catastrophic backtracking). User-supplied entries are
validated: they must compile and must not match the empty string or common normal lines.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from importlib import resources
from typing import Any

import re2

from kb import KbError

MAX_REGEX_LEN = 2000
MAX_ENTRIES = 50
MIN_TEMPLATE_LITERAL_CHARS = 8
VARIABLE_GAP = ".{1,256}?"  # what one "<*>" stands for: bounded, lazy
_MASK_RE = re.compile(r"<(?:\*|[A-Z][A-Z0-9_]*)>")
_ENTRY_KINDS = ("regex", "template", "literal")


def re2_options() -> re2.Options:
    opts = re2.Options()
    opts.max_mem = 64 << 20
    return opts


def compile_re2(pattern: str) -> re2._Regexp:
    """Compile with RE2, raising KbError with RE2's reason on failure."""
    try:
        return re2.compile(pattern, options=re2_options())
    except re2.error as exc:
        raise KbError(f"regex does not compile under RE2: {pattern!r}: {exc}") from None


def template_to_regex(template: str) -> str:
    """Turn a Drain template into a regex: literal parts escaped, whitespace runs -> \\s+,
    each variable part ("<*>", "<NUM>", ...) -> a bounded lazy gap."""
    parts = _MASK_RE.split(template.strip())
    out: list[str] = []
    for i, part in enumerate(parts):
        if i:
            out.append(VARIABLE_GAP)
        tokens = part.split()
        lead = part[:1].isspace() and i > 0
        trail = part[-1:].isspace() and i < len(parts) - 1
        body = r"\s+".join(re2.escape(t) for t in tokens)
        if lead and body:
            body = r"\s+" + body
        if trail and body:
            body = body + r"\s+"
        if not body and part and i and i < len(parts) - 1:
            body = r"\s+"
        out.append(body)
    return "".join(out)


def literal_chars(template: str) -> int:
    return sum(len(p.replace(" ", "")) for p in _MASK_RE.split(template))


def normalize_signature(signature: Any) -> list[dict[str, str]]:
    """Accept a list of strings (regexes) and/or one-key dicts; return [{kind: text}, ...]."""
    if isinstance(signature, (str, dict)):
        signature = [signature]
    if not isinstance(signature, list) or not signature:
        raise KbError("signature must be a non-empty list of regexes/templates")
    if len(signature) > MAX_ENTRIES:
        raise KbError(f"signature has {len(signature)} entries; at most {MAX_ENTRIES}")
    out: list[dict[str, str]] = []
    for entry in signature:
        if isinstance(entry, str):
            entry = {"regex": entry}
        if not isinstance(entry, dict) or len(entry) != 1:
            raise KbError(f"signature entry must be a string or one of {_ENTRY_KINDS}: {entry!r}")
        ((kind, text),) = entry.items()
        if kind not in _ENTRY_KINDS:
            raise KbError(f"signature entry kind must be one of {_ENTRY_KINDS}, not {kind!r}")
        if not isinstance(text, str) or not text.strip():
            raise KbError(f"signature {kind} must be a non-empty string")
        if len(text) > MAX_REGEX_LEN:
            raise KbError(f"signature {kind} longer than {MAX_REGEX_LEN} characters")
        out.append({kind: text})
    return out


def entry_regex(entry: dict[str, str]) -> str:
    ((kind, text),) = entry.items()
    if kind == "regex":
        return text
    if kind == "template":
        return template_to_regex(text)
    return re2.escape(text)


@functools.lru_cache(maxsize=1)
def normal_lines() -> tuple[str, ...]:
    """Healthy log lines that no fault signature may match (shipped in kb/library)."""
    text = resources.files("kb").joinpath("library/normal_lines.txt").read_text(encoding="utf-8")
    return tuple(line for line in text.splitlines() if not line.startswith("# "))


def validate_signature(signature: Any, *, probes: Iterable[str] | None = None) -> list[dict[str, str]]:
    """Normalize and check a signature; raise KbError explaining the first problem.

    Rejected: entries that do not compile under RE2, match the empty string, or match any of
    the normal lines (``probes``, default :func:`normal_lines`); templates with fewer than
    ``MIN_TEMPLATE_LITERAL_CHARS`` fixed characters.
    """
    entries = normalize_signature(signature)
    probe_lines = tuple(probes) if probes is not None else normal_lines()
    for entry in entries:
        ((kind, text),) = entry.items()
        if kind == "template" and literal_chars(text) < MIN_TEMPLATE_LITERAL_CHARS:
            raise KbError(f"template too unspecific (fewer than {MIN_TEMPLATE_LITERAL_CHARS} fixed "
                          f"characters): {text!r}")
        rx = compile_re2(entry_regex(entry))
        if rx.search("") is not None:
            raise KbError(f"signature {kind} matches the empty string: {text!r}")
        for line in probe_lines:
            if rx.search(line) is not None:
                raise KbError(f"signature {kind} is too broad: it matches the normal line {line[:80]!r}")
    return entries
