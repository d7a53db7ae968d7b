"""The features of a candidate root cause, what a learned order of the scored events reads.

`engine.events.score_events` orders the candidate events by a hand-set formula (severity ×
specificity × rarity × role damping). `features` describes each of the first `HEAD` events of that
order by what the engine already knows of it: its severity, specificity, rarity and role, whether a
root cause is in sight, the launcher's killed-first block, where its first line sits among the
candidates and in its file, whether it is the first severe line of a file, follows a traceback's
head, is the exception a wrapper carries, its level, count, nodes share, how close to its file's
last line it is, its lexicon family. `l4 bench root-model extract|cv` (engine/bench/root_learn.py)
fits linear orders (`RootModel`) over these features on labelled cases and compares them with the
hand order by leave-one-wave-out cross-validation. None beat it (README, "a learned order of the
root cause"), so the engine does not re-order: nothing here is called by `diagnose`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from engine.model import ParsedJob
from engine.rules import load

HEAD = 20  # the first events of the hand order that are described (a model re-orders at most these)
ROLES = ("none", "cascade", "consequence", "report", "wrapper", "context")
SEVERE = 0.6  # a line at least this severe is a "severe line" (engine.events.ROOT_SEVERITY)
TRACEBACK_REACH = 60  # lines after a traceback's head that count as inside it
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_EXC_TYPE = re.compile(r"^\S*?(?:Error|Exception)\w*:\s*")


@lru_cache(maxsize=1)
def _families() -> list[tuple[float, str, re.Pattern[str]]]:
    """The severity lexicon's terms as (weight, family name, pattern): the name is the term's first
    alternative, so that terms inserted before it do not rename it."""
    out = []
    for t in load("severity")["terms"]:
        name = re.sub(r"[^A-Za-z0-9]+", "_", t["regex"].split("|")[0]).strip("_")[:24] or "term"
        out.append((float(t["w"]), name, re.compile(t["regex"])))
    return out


def family(template: str) -> str:
    """The lexicon family of a template: the first term of the highest weight that it matches."""
    best, name = 0.0, "none"
    for w, fam, rx in _families():
        if w > best and rx.search(template):
            best, name = w, fam
    return name


def _message(raw: str) -> str:
    from engine.headers import parse_header

    return parse_header(raw).message.strip()


def features(parsed: ParsedJob, scored: Sequence) -> list[dict[str, float]]:
    """One feature dict per event of `scored[:HEAD]` (`engine.events.ScoredEvent`s, the hand
    order), from the job and the scored list alone."""
    from engine.severity import severity as lexicon_severity

    head = list(scored[:HEAD])
    if not head:
        return []
    n_nodes = max(1, len(parsed.node_counts))
    sev = {e.id: e.severity for e in scored}
    role = {e.id: e.role or "none" for e in scored}
    spec = {}
    for e in head:
        k = max(1, len(parsed.templates[e.id].nodes))
        spec[e.id] = 1.0 if n_nodes == 1 else 1.0 - (k - 1) / (n_nodes - 1)
    has_root = any(role[e.id] == "none" and sev[e.id] >= SEVERE
                   and (n_nodes == 1 or 1.0 - (max(1, len(parsed.templates[e.id].nodes)) - 1)
                        / (n_nodes - 1) >= 0.5) for e in scored)
    killed = any(e.evidence for e in scored)
    ids = {e.id for e in head}
    # per file: the first line of the first severe candidate (any role; no echo), and traceback heads
    first_severe: set[int] = set()
    first_own: set[int] = set()
    first_cand: set[int] = set()
    in_tb: set[int] = set()
    tail: dict[int, int] = {}
    rel_first: dict[int, float] = {}
    for path, pos in parsed.positions.items():
        severe = [(p[0], i) for i, p in pos.items() if sev.get(i, 0.0) >= SEVERE]
        if severe:
            first_severe.add(min(severe)[1])
            own = [x for x in severe if role.get(x[1]) == "none"]
            if own:
                first_own.add(min(own)[1])
        cands = [(p[0], i) for i, p in pos.items() if i in sev]
        if cands:
            first_cand.add(min(cands)[1])
        heads = sorted(p[0] for i, p in pos.items()
                       if i in sev and _TRACEBACK.search(parsed.templates[i].template))
        n_lines = max(1, parsed.file_lines.get(path, 0))
        for i in ids.intersection(pos):
            first, last = pos[i]
            tail[i] = min(tail.get(i, 1 << 30), max(0, n_lines - 1 - last))
            rel_first[i] = min(rel_first.get(i, 1.0), first / n_lines)
            if any(h < first <= h + TRACEBACK_REACH for h in heads):
                in_tb.add(i)
    # the exception a wrapper carries: its message (exception type aside) inside a wrapper's line
    wrapped = [_message(parsed.templates[e.id].examples[0]) for e in scored
               if e.role == "wrapper" and parsed.templates[e.id].examples]
    order = sorted(head, key=lambda e: (parsed.templates[e.id].first_seen is None,
                                        parsed.templates[e.id].first_seen or "", rel_first.get(e.id, 1.0)))
    seen_rank = {e.id: r for r, e in enumerate(order)}
    top_score = max(head[0].score, 1e-6)
    max_sev = max(sev[e.id] for e in head)
    out = []
    for r, e in enumerate(head):
        t = parsed.templates[e.id]
        ro = role[e.id]
        f: dict[str, float] = {
            "severity": e.severity, "specificity": spec[e.id],
            "rarity": 1.0 / (1.0 + math.log10(max(1, t.count))),
            "log_count": math.log10(max(1, t.count)), "nodes_share": len(t.nodes) / n_nodes,
            f"role={ro}": 1.0, f"role={ro}|root" if has_root else f"role={ro}|noroot": 1.0,
            "has_root": float(has_root), "killed": float(killed),
            "raised": float(e.severity > lexicon_severity(t.template, t.level) + 1e-9),
            f"level={t.level or 'none'}": 1.0, f"family={family(t.template)}": 1.0,
            "seen_first": float(seen_rank[e.id] == 0), "seen_rank": seen_rank[e.id] / max(1, len(head) - 1),
            "first_severe": float(e.id in first_severe), "first_own_severe": float(e.id in first_own),
            "first_candidate": float(e.id in first_cand), "in_traceback": float(e.id in in_tb),
            "tail_le2": float(tail.get(e.id, 1 << 30) <= 2), "last_line": float(tail.get(e.id, 1 << 30) == 0),
            "rel_first": rel_first.get(e.id, 1.0),
            "evidence": float(bool(e.evidence)), "truncated": float(e.id in parsed.truncated_tails),
            "sev_gap": max_sev - e.severity, "is_max_sev": float(e.severity >= max_sev),
            # the hand formula itself (the blend reads these; the learned order alone does not)
            "hand": e.score, "hand_ratio": e.score / top_score, "hand_first": float(r == 0),
            "hand_rank": r / max(1, len(head) - 1),
        }
        if killed:
            f[f"role={ro}|killed"] = 1.0
        if e.role is None and t.examples and wrapped:
            msg = _EXC_TYPE.sub("", _message(t.examples[0]), count=1)
            if len(msg) >= 20 and any(msg in w for w in wrapped):
                f["carried"] = 1.0
        out.append(f)
    return out


HAND_FEATURES = ("hand", "hand_ratio", "hand_first", "hand_rank")


@dataclass(frozen=True)
class RootModel:
    """A linear order: the first `top_k` events by the sum of their features times `weights`."""
    version: int
    top_k: int
    weights: dict[str, float]

    def score(self, f: dict[str, float]) -> float:
        return sum(self.weights.get(k, 0.0) * v for k, v in f.items())
