"""Where a diagnosed failure sits — node, rank, stage, iteration — for the top line of a report,
and the small text helpers the reports share (no silent cuts, control characters escaped)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

from engine.model import NOTABLE_NODE_SCORE, Diagnosis

# "[rank31]:", "[PG 0 Rank 31]", "rank=31", "rank: 31" in a log line; "rank-0031.log" in a file name
_RANK_IN_LINE = re.compile(r"(?i)\brank\s*[=:]?\s*(\d{1,7})\b")
_RANK_IN_FILE = re.compile(r"(?i)rank[-_.]?0*(\d{1,7})")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


@dataclass(frozen=True)
class Where:
    node: str | None
    rank: str | None
    stage: str
    iteration: int | None

    def line(self) -> str:
        parts = [f"node {self.node or '-'}", f"rank {self.rank or '-'}", f"stage {self.stage}",
                 f"iteration {self.iteration if self.iteration is not None else '-'}"]
        return " · ".join(parts)


# below this probability the learned model's reading of the failure's words is called a guess: on the held-out
# public test halves such answers were right 0.54 of the time (README, "How far to trust the stage")
GUESS_BELOW = 0.4
_BASIS_PHRASES = {
    "timeline": "placed by the job's own progress and stage lines",
    "frame": "from the failing function in its traceback",
    "lexicon": "from a framework message or frame L4 knows",
    "rules": "from the stage rules",
}


def stage_basis_phrase(d: Diagnosis) -> str:
    """What the diagnosis's stage rests on, in words ("" when it does not say): the reader's cue to how far
    to trust it."""
    basis = d.stage_basis
    if basis is None or d.stage == "unknown":
        return ""
    if basis.source == "words":
        p = basis.probability if basis.probability is not None else 0.0
        return f"{'a guess' if p < GUESS_BELOW else 'read'} from the failure's words, p {p:.2f}"
    return _BASIS_PHRASES.get(basis.source, "")


def locate(d: Diagnosis) -> Where:
    """The most suspicious node, the rank on it that the evidence names, the stage, and the first
    anomalous iteration."""
    top = d.nodes[0].node if d.nodes and d.nodes[0].score >= NOTABLE_NODE_SCORE else None
    if top is None and d.events and len(d.events[0].nodes) == 1:
        top = d.events[0].nodes[0]  # one node carries the strongest event
    iteration = d.iterations[0].iteration if d.iterations else None
    return Where(top, _rank(d, top), d.stage, iteration)


def _rank(d: Diagnosis, node: str | None) -> str | None:
    if node is None:
        return None
    texts = [x for m in d.matches for x in m.evidence]
    texts += [x for e in d.events if node in e.nodes for x in e.examples]
    for text in texts:
        m = _RANK_IN_LINE.search(text)
        if m:
            return str(int(m.group(1)))
    series = d.detail.iteration_series if d.detail else []
    for s in sorted(series, key=lambda s: not s.flagged):  # a rank file with flagged iterations first
        if s.node == node:
            m = _RANK_IN_FILE.search(PurePath(s.file).name)
            if m:
                return str(int(m.group(1)))
    return None


def shown(text: object) -> str:
    """`text` on one line: control characters (a newline in a node name...) shown escaped."""
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), str(text))


def cut(text: str, limit: int) -> str:
    """`text` shortened to `limit` characters with a visible mark, never silently."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def listed(items: list[str], limit: int) -> str:
    """The first `limit` items, comma-separated, and "+N more" for the rest."""
    head = ", ".join(shown(x) for x in items[:limit])
    return head + (f" +{len(items) - limit} more" if len(items) > limit else "")


def by_suspicion(d: Diagnosis, nodes: list[str]) -> list[str]:
    """`nodes` with the diagnosis' most suspicious first (the others keep their order)."""
    score = {n.node: n.score for n in d.nodes}
    return sorted(nodes, key=lambda n: -score.get(n, 0.0))
