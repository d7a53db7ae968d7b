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


MIN_REGEX_LITERAL_CHARS = 4  # fixed characters a regex or literal entry must require
_REPEAT_OPS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def re2_options() -> re2.Options:
    opts = re2.Options()
    opts.max_mem = 64 << 20
    opts.log_errors = False  # RE2 would print its C++ log lines on stderr for each bad pattern
    return opts


def _reason(exc: Exception) -> str:
    arg = exc.args[0] if exc.args else exc
    return arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)


def compile_re2(pattern: str) -> re2._Regexp:
    """Compile with RE2, raising KbError with RE2's reason on failure."""
    try:
        return re2.compile(pattern, options=re2_options())
    except re2.error as exc:
        raise KbError(f"regex does not compile under RE2: {pattern!r}: {_reason(exc)}") from None


def _shape(pattern: str):  # noqa: ANN202 - a parsed regex (re._parser's SubPattern) or None
    """The regex parsed by Python's own parser, for shape checks; None for RE2-only syntax."""
    import re._parser as sre_parse  # stdlib; the syntax RE2 shares with Python's re

    try:
        return sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None


def _required_chars(items) -> int:  # noqa: ANN001
    """Fixed characters every match of the parsed regex `items` must contain (a lower bound)."""
    n = 0
    for op, arg in items:
        name = str(op)
        if name == "LITERAL":
            n += 1
        elif name == "SUBPATTERN":
            n += _required_chars(arg[-1])
        elif name in _REPEAT_OPS:
            lo, _hi, body = arg
            n += min(lo, 4) * _required_chars(body)
        elif name == "BRANCH":
            n += min((_required_chars(b) for b in arg[1]), default=0)
        elif name == "ATOMIC_GROUP":
            n += _required_chars(arg)
    return n


def _nested_repeat(items, inside: bool = False) -> bool:  # noqa: ANN001
    """Whether a repetition holds another unbounded one, like `(a+)+` or `(x*)*`."""
    for op, arg in items:
        name = str(op)
        if name in _REPEAT_OPS:
            _lo, hi, body = arg
            unbounded = hi > 1
            if inside and unbounded:
                return True
            if _nested_repeat(body, inside or unbounded):
                return True
        elif name == "SUBPATTERN":
            if _nested_repeat(arg[-1], inside):
                return True
        elif name == "BRANCH":
            if any(_nested_repeat(b, inside) for b in arg[1]):
                return True
        elif name == "ATOMIC_GROUP" and _nested_repeat(arg, inside):
            return True
    return False


def check_regex_shape(pattern: str) -> None:
    """Refuse regexes that are catastrophic elsewhere or match almost anything: a repetition of a
    repetition (`(a+)+$`: exponential in backtracking engines, and a sign of a mistake even under
    RE2, which runs it in linear time) and fewer than MIN_REGEX_LITERAL_CHARS fixed characters."""
    parsed = _shape(pattern)
    if parsed is None:
        return
    if _nested_repeat(list(parsed)):
        raise KbError(f"regex nests one repetition in another (catastrophic backtracking shape, "
                      f"like (a+)+): {pattern!r}")
    if _required_chars(list(parsed)) < MIN_REGEX_LITERAL_CHARS:
        raise KbError(f"regex too unspecific: every match needs fewer than {MIN_REGEX_LITERAL_CHARS} "
                      f"fixed characters: {pattern!r}")


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
    the normal lines (``probes``, default :func:`normal_lines`; the message shows the line);
    templates with fewer than ``MIN_TEMPLATE_LITERAL_CHARS`` fixed characters; regexes that nest
    repetitions or need fewer than ``MIN_REGEX_LITERAL_CHARS`` fixed characters (both checks
    are skipped with ``probes=()``, the built-in library's own validation).
    """
    check_shape = probes is None or bool(tuple(probes))
    entries = normalize_signature(signature)
    probe_lines = tuple(probes) if probes is not None else normal_lines()
    for entry in entries:
        ((kind, text),) = entry.items()
        if kind == "template" and literal_chars(text) < MIN_TEMPLATE_LITERAL_CHARS:
            raise KbError(f"template too unspecific (fewer than {MIN_TEMPLATE_LITERAL_CHARS} fixed "
                          f"characters): {text!r}")
        if kind == "literal" and len(text.strip()) < MIN_REGEX_LITERAL_CHARS:
            raise KbError(f"literal too unspecific (fewer than {MIN_REGEX_LITERAL_CHARS} characters): "
                          f"{text!r}")
        rx = compile_re2(entry_regex(entry))
        if rx.search("") is not None:
            raise KbError(f"signature {kind} matches the empty string: {text!r}")
        if kind == "regex" and check_shape:
            check_regex_shape(text)
        for line in probe_lines:
            if rx.search(line) is not None:
                raise KbError(f"signature {kind} is too broad: it matches the normal line {line[:80]!r}")
    return entries
