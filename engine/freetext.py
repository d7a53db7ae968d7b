"""Where nothing repeats: the "free text" regime of a rank file's scan, and what keeps a line out of it.

Jobs that print generated samples, prompts or per-step prose write thousands of distinct lines
that folding cannot group; each would go through header parsing, masking and Drain on its own
(about 150 µs a line, 0.6 MB per CPU-second). The key pass (`fold.key_ids`, engine/_fold.c)
therefore watches, per file, the share of new pre-keys among the distinct lines it looks up, in
windows of `window` of them. Once the file holds `min_keys` pre-keys and a window was at least
`enter` new, the file is in the regime: a new pre-key becomes the *free key* FREE + its leading
words that are frequent at the start of new lines (at least one in `literal_share` of the last
window's, up to `literal_words` words: a constant prefix such as "Sample:"), so one line per free
key reaches Drain and its template shows those words and "<*>". The regime ends when a window is
less than `leave` new (keys repeat again). Repeated pre-keys keep their ids.

A line keeps today's path, whatever the regime, when its pre-key holds a *needle*: a literal
that every match of a severity term, a message-level rule, a header's warning/error/fatal level,
a traceback or launcher phrase must contain (derived from engine/data/severity.yaml and
headers.yaml by `needles`), or a glog level letter E/W/F at its start; so does an iteration marker
(the needles of iterations.yaml, on lines with a digit or a folded number). The parameters are
in engine/data/masking.yaml (`free_text:`).
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from engine.rules import load

try:
    import re._constants as _sc
    import re._parser as _sp
except ImportError:  # Python < 3.11
    import sre_constants as _sc  # type: ignore[no-redef]
    import sre_parse as _sp  # type: ignore[no-redef]

FREE = b"\x02"  # free keys start with it (the regime's groups; see `fold.key_ids`)
BOUNDARY = b"\x00"  # in a needle: a word boundary (`\b`; ASCII letters, digits and "_" are word bytes)
SKIP = b"\x01"  # in a needle: any ASCII white space, or none (`\s*`)
MARKS = BOUNDARY + SKIP
MAX_CLASS = 4  # a character class of at most this many characters is expanded into literals
MAX_ALTERNATIVES = 64  # literals one run of a pattern may expand into
_ALARM_LEVELS = {"WARN", "ERROR", "FATAL"}


@dataclass(frozen=True)
class Params:
    window: int
    min_keys: int
    enter: float
    leave: float
    literal_share: float
    literal_words: int
    max_free_keys: int


@lru_cache(maxsize=1)
def params() -> Params:
    f = load("masking")["free_text"]
    return Params(int(f["window"]), int(f["min_keys"]), float(f["enter"]), float(f["leave"]),
                  float(f["literal_share"]), int(f["literal_words"]), int(f["max_free_keys"]))


def _literals(items) -> set[bytes] | None:
    """Literals one of which every match of the parsed pattern `items` contains; None if there are
    none to be had (the pattern can match without a literal of two bytes or more, or of one
    punctuation byte). In a literal, BOUNDARY stands for `\\b` and SKIP for `\\s*`."""
    options: list[set[bytes]] = []
    run: set[bytes] = {b""}

    def close() -> None:
        nonlocal run
        run = {s.strip(SKIP) for s in run}
        if all(_real(s) >= 2 or (_real(s) == 1 and not (s.strip(MARKS).isalnum() or s.isspace()))
               for s in run):
            options.append(run)  # one byte is enough when it is punctuation ("^", "|")
        run = {b""}

    for op, av in items:
        exact = _exact(op, av)
        if exact is not None and len(run) * len(exact) <= MAX_ALTERNATIVES:
            run = {s + e for s in run for e in exact}
            continue
        close()
        if op is _sc.SUBPATTERN:
            inner = _literals(av[-1])
            if inner is not None:
                options.append(inner)
        elif op is _sc.BRANCH:
            branches = [_literals(b) for b in av[1]]
            if all(b is not None for b in branches):
                options.append(set().union(*branches))  # type: ignore[arg-type]
        elif op in (_sc.MAX_REPEAT, _sc.MIN_REPEAT) and av[0] >= 1:
            inner = _literals(av[2])
            if inner is not None:
                options.append(inner)
    close()
    if not options:
        return None
    return max(options, key=lambda o: (min(_real(s) for s in o), -len(o)))  # the longest, then the fewest


def _exact(op, av) -> set[bytes] | None:
    """Every string one parsed item matches, when they are few: literals, small classes, groups and
    alternations of those, an optional one ("d?"), `\\b` (BOUNDARY), `\\s*` (SKIP), ^ and $ ("")."""
    if op is _sc.LITERAL:
        return {bytes([av])} if av < 128 else None
    if op is _sc.IN:
        chars = _class_chars(av)
        return {bytes([c]) for c in chars} if chars is not None and all(c < 128 for c in chars) else None
    if op is _sc.AT:
        return {BOUNDARY} if av is _sc.AT_BOUNDARY else {b""}
    if op is _sc.SUBPATTERN:
        return _exact_seq(av[-1])
    if op is _sc.BRANCH:
        out: set[bytes] = set()
        for branch in av[1]:
            got = _exact_seq(branch)
            if got is None:
                return None
            out |= got
        return out if len(out) <= MAX_ALTERNATIVES else None
    if op is _sc.MAX_REPEAT and av[0] == 0 and len(av[2]) == 1 and av[2][0] == (_sc.IN, [(_sc.CATEGORY,
                                                                                       _sc.CATEGORY_SPACE)]):
        return {SKIP}
    if op in (_sc.MAX_REPEAT, _sc.MIN_REPEAT) and av[0] == 0 and av[1] == 1:
        got = _exact_seq(av[2])
        return got | {b""} if got is not None else None
    return None


def _exact_seq(items) -> set[bytes] | None:
    out: set[bytes] = {b""}
    for op, av in items:
        got = _exact(op, av)
        if got is None or len(out) * len(got) > MAX_ALTERNATIVES:
            return None
        out = {s + g for s in out for g in got}
    return out


def _real(lit: bytes) -> int:
    """The characters a literal matches (its BOUNDARY and SKIP marks are none)."""
    return len(lit) - lit.count(BOUNDARY) - lit.count(SKIP)


def _class_chars(av) -> list[int] | None:
    out: list[int] = []
    for op, v in av:
        if op is _sc.LITERAL:
            out.append(v)
        elif op is _sc.RANGE and v[1] - v[0] < MAX_CLASS:
            out.extend(range(v[0], v[1] + 1))
        else:
            return None
    return out if len(out) <= MAX_CLASS else None


def pattern_literals(pattern: str) -> set[bytes] | None:
    """Literals one of which every match of regex `pattern` contains (None: no such set)."""
    return _literals(_sp.parse(pattern))


def _level_words() -> list[str]:
    """The level words of the header prefixes (headers.yaml) that mean a warning, an error or worse."""
    data = load("headers")
    levels = {str(k): str(v) for k, v in data["levels"].items()}
    words: set[str] = set()
    for p in data["prefixes"]:
        m = re.search(r"\(\?P<level>([^()]*)\)", p["regex"])
        if m and re.fullmatch(r"[\w|]+", m.group(1)):
            words.update(m.group(1).split("|"))
    return sorted(w for w in words if len(w) >= 2 and levels.get(w, levels.get(w.upper(), w.upper()))
                  in _ALARM_LEVELS)


def alarm_patterns() -> list[str]:
    """The regexes whose lines keep today's path: severity terms, cascades, the launcher roles,
    traceback context (the first `damp` rule), the message-level rules."""
    sev, hdr = load("severity"), load("headers")
    roles = sev.get("roles", {})
    out = [t["regex"] for t in sev["terms"]] + list(sev.get("cascade", []))
    for role in ("report", "consequence", "wrapper", "disconnect"):
        out += list(roles.get(role, []))
    out += [sev["damp"][0]["regex"]] if sev.get("damp") else []
    out += [m["regex"] for m in hdr["message_levels"]]
    return out


@lru_cache(maxsize=1)
def needles() -> tuple[tuple[bytes, ...], tuple[bytes, ...]] | None:
    """(alarm needles, marker needles): a pre-key holding an alarm needle, or a marker needle with
    a digit or "<*>" in it, keeps today's path. None when some pattern has no needles (then no
    line is grouped: none may be lost in a free key). Derived once per process, when first needed."""
    alarm: set[bytes] = {w.encode() for w in _level_words()}
    for p in alarm_patterns():
        lits = pattern_literals(p)
        if lits is None:
            return None
        alarm |= lits
    marker: set[bytes] = set()
    for m in load("iterations")["markers"]:
        lits = pattern_literals(m["regex"])
        if lits is None:
            return None
        marker |= lits
    return _minimal(alarm), _minimal(marker - alarm)


def _minimal(lits: Iterable[bytes]) -> tuple[bytes, ...]:
    """`lits` without those that hold a shorter one (it finds them already), sorted."""
    ordered = sorted(set(lits), key=lambda s: (len(s), s))
    kept: list[bytes] = []
    for s in ordered:
        if not any(k in s for k in kept):
            kept.append(s)
    return tuple(sorted(kept))


Rules = tuple[tuple[int, ...], Callable[[], "tuple[tuple[bytes, ...], tuple[bytes, ...]] | None"]]


def rules() -> Rules:
    """The regime's parameters as the key pass takes them: counts, and `needles` (called only once
    a line may be grouped: deriving them costs a fifth of a second, most files never need them)."""
    p = params()
    counts = (p.window, p.min_keys, math.ceil(p.enter * p.window), math.ceil(p.leave * p.window),
              max(1, math.ceil(p.literal_share * p.window)), p.literal_words, p.max_free_keys)
    return counts, needles


# ----------------------------------------------------------------------------- the Python twin
# of the regime in engine/_fold.c's keys(), for builds without the extension (same keys).

_M64 = (1 << 64) - 1
PREFIX_SLOTS = 1 << 12
RECENT_SLOTS = 1 << 14
GLOG_LEVEL = re.compile(rb"\[?[EWF][0-9]{4} ")
NUMBER = re.compile(rb"[0-9]|<\*>")


def hash_bytes(b: bytes) -> int:
    """engine/_fold.c's hash_bytes (little-endian words)."""
    n = len(b)
    h = 0x9E3779B97F4A7C15 ^ n
    i = 0
    while n - i >= 8:
        h = ((h ^ int.from_bytes(b[i:i + 8], "little")) * 0xFF51AFD7ED558CCD) & _M64
        h ^= h >> 32
        i += 8
    h = ((h ^ int.from_bytes(b[i:], "little")) * 0xC4CEB9FE1A85EC53) & _M64
    return h ^ (h >> 29)


@dataclass
class PyState:
    """The regime's state of one file (FreeState in engine/_fold.c)."""

    on: bool = False
    events: int = 0
    fresh: int = 0
    free_keys: int = 0
    cur: list[int] = field(default_factory=lambda: [0] * PREFIX_SLOTS)
    prev: list[int] = field(default_factory=lambda: [0] * PREFIX_SLOTS)
    recent: list[int] = field(default_factory=lambda: [0] * RECENT_SLOTS)


def _word_ends(key: bytes, most: int) -> list[int]:
    ends, i, n = [], 0, len(key)
    while len(ends) < most:
        while i < n and key[i] in b" \t":
            i += 1
        if i >= n:
            break
        while i < n and key[i] not in b" \t":
            i += 1
        ends.append(i)
    return ends


def _slot(key: bytes, end: int, k: int) -> int:
    return ((hash_bytes(key[:end]) + k) & _M64) & (PREFIX_SLOTS - 1)


@lru_cache(maxsize=4)
def _needle_regex(found: tuple[bytes, ...]) -> re.Pattern[bytes]:
    marks = {BOUNDARY[0]: rb"\b", SKIP[0]: rb"\s*"}
    return re.compile(b"|".join(b"".join(marks.get(c) or re.escape(bytes([c])) for c in nd) for nd in found))


def keeps_path(key: bytes, alarm: tuple[bytes, ...], marker: tuple[bytes, ...]) -> bool:
    """A pre-key that keeps its own path in the regime (see the module's docstring)."""
    if _needle_regex(alarm).search(key) or GLOG_LEVEL.match(key):
        return True
    return NUMBER.search(key) is not None and _needle_regex(marker).search(key) is not None


def _event(st: PyState, counts: tuple[int, ...], fresh: bool, keys: int) -> None:
    window, min_keys, enter, leave = counts[:4]
    st.events += 1
    st.fresh += fresh
    if st.events < window:
        return
    if not st.on and st.fresh >= enter and keys >= min_keys:
        st.on = True
    elif st.on and st.fresh < leave:
        st.on = False
    st.prev, st.cur = st.cur, [0] * PREFIX_SLOTS
    st.events = st.fresh = 0


def py_keys(folded: bytes, table: dict[bytes, int], room: int, st: PyState, rule: Rules
            ) -> tuple[list[int], list[int], list[bytes]]:
    """engine/_fold.c's keys() with the regime: ids of the lines of `folded`, new lines, new keys."""
    counts, getter = rule
    literal_min, literal_words, max_free = counts[4], min(counts[5], 8), counts[6]
    ids: list[int] = []
    fresh_lines: list[int] = []
    fresh_keys: list[bytes] = []
    lines = folded.split(b"\n")
    times = Counter(lines)  # a line that comes twice in the block repeats: it is never free text
    seen: dict[bytes, int] = {}  # line -> its id
    for row, key in enumerate(lines):
        if key in seen:
            ids.append(seen[key])
            continue
        once = times[key] == 1
        found, fresh = table.get(key), False
        if found is None:
            found = -1
            h = hash_bytes(key)
            r, mark = h & (RECENT_SLOTS - 1), h | 1
            fresh = st.recent[r] != mark and once
            ends = _word_ends(key, literal_words)
            if fresh:
                for k, end in enumerate(ends, start=1):
                    st.cur[_slot(key, end, k)] += 1
            found_needles = getter() if st.on and once and key[:1] not in (b"", b"\x00") else None
            if found_needles is not None and not keeps_path(key, *found_needles):
                lit = 0
                for k, end in enumerate(ends, start=1):
                    if st.prev[_slot(key, end, k)] < literal_min:
                        break
                    lit = end
                fk = FREE + key[:lit]
                if fk not in table and lit > 0 and st.free_keys >= max_free:
                    fk = FREE
                fid = table.get(fk)
                if fid is not None:
                    found = fid
                elif len(fresh_keys) < room:
                    found = table[fk] = len(table)
                    fresh_lines.append(row)
                    fresh_keys.append(fk)
                    st.free_keys += 1
                st.recent[r] = mark
            elif len(fresh_keys) < room:
                found = table[key] = len(table)
                fresh_lines.append(row)
                fresh_keys.append(key)
        _event(st, counts, fresh, len(table))
        seen[key] = found
        ids.append(found)
    return ids, fresh_lines, fresh_keys
