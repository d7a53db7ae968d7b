"""Ranking of candidate events: what an engineer should read first, the root cause before its echoes.

An event's score combines how alarming its text is (severity lexicon and level), how specific it is
to a few nodes (a root cause sits on the faulty node; a cascade is everywhere), and how rare it is.
Then the event's *role* (`engine.roles`): consequences of a failure (the launcher's summaries, the
watchdog cascade on healthy ranks), wrappers (a generic error that quotes or points to another),
and traceback context rank below the line that started it, as long as such a line is in sight.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from engine.known import KnownSignature
from engine.lastwords import last_words
from engine.masking import MASK
from engine.model import ClockNote, ParsedJob
from engine.quiet import quiet_evidence
from engine.reports import report_groups, shown_lines
from engine.roles import CASCADE, CONSEQUENCE, CONTEXT, REPORT, WRAPPER, Roles, event_roles
from engine.root_severity import LiftModel, learned_severity
from engine.severity import severity

MAX_EVENTS = 10
MAX_ECHOES = 8
MIN_SCORE = 0.35  # events below this are not worth an engineer's time
RELATIVE = 0.5  # and neither are those far below the best one
# when none reaches MIN_SCORE, the best ones are still shown if they are at least FALLBACK_SCORE (a
# warning-level novel line) and near the best; when none is even that, the single best line is: a failed job
# has a cause, and where no line reads as an error (a hang's last words, an INFO line saying the device is
# held by another process) the line that scored best among the few that survived filtering may be it, while
# two more at the same low score would only be noise beside it. Development halves against showing nothing
# there: public root among the first 3 events 320 -> 321 of 326, stage 311 -> 313 (no event had meant no
# stage), events precision 0.91 either way; wave 17 (first measured this session) root first 12 -> 13 of 19,
# precision 0.80 -> 0.81. The best three there instead: the same roots, precision 0.90 and 0.77 (outsider 3's
# dev half 0.97 -> 0.94 when the relative floor went too)
FALLBACK_EVENTS = 3
FALLBACK_SCORE = 0.2
CASCADE_FACTOR = 0.55
CASCADE_SPEC = 0.25  # a cascade on few nodes is damped less, but stays below a root cause in sight
ROOT_SEVERITY = 0.6  # a non-consequence event at least this severe is a root cause in sight
TRUNCATED_SEVERITY = 0.8
FACTORS = {CONSEQUENCE: 0.45, REPORT: 0.5, WRAPPER: 0.75, CONTEXT: 0.3}  # when a root cause is in sight
ALONE = {CONSEQUENCE: 0.6, REPORT: 1.0, WRAPPER: 0.9, CONTEXT: 0.5}  # when none is
REPORT_SEVERITY = 0.85  # the launcher's report of a dead rank is evidence when nothing else is
CONSEQUENCE_SEVERITY = 0.6  # a summary's alarming words ("SIGTERM", "FAILED") say nothing new


@dataclass(frozen=True)
class ScoredEvent:
    id: int
    score: float
    severity: float
    cascade: bool
    role: str | None = None
    evidence: tuple[str, ...] = ()  # raw lines to show before the template's own examples
    evidence_nodes: tuple[str, ...] = ()  # the nodes of those lines (where the event points), if known
    known: str | None = None  # the id of the known signature its lines match (engine.known)
    last_words: bool = False  # it ends a log file of a job with no alarm in sight (engine.lastwords)


_ALPHA = re.compile(r"[A-Za-z]{3,}")


def crash_tails(parsed: ParsedJob) -> dict[int, int]:
    """The cut-off last lines (template -> files) that read as the last words of a rank that died
    mid-line: only when few files have one (some writers never end their lines), and not the start of a
    line the job logs whole elsewhere, nor a line without a word — then the rank was writing routine
    output when it stopped, and the words point to nothing (the stop is the node's evidence, not this
    event's). A cut template is such a start when its tokens but the last open another template and its
    last (partial) token opens the token there."""
    tails = parsed.truncated_tails
    if not tails or sum(tails.values()) > max(1, len(parsed.file_nodes)) / 4:
        return {}
    whole: dict[str, list[list[str]]] = {}
    for i, t in enumerate(parsed.templates):
        tokens = t.template.split()
        if tokens and i not in tails:
            whole.setdefault(tokens[0], []).append(tokens)
    out = {}
    for i, n in tails.items():
        tokens = parsed.templates[i].template.split()
        if not any(_ALPHA.search(t.replace(MASK, " ")) for t in tokens):
            continue
        head, stem = tokens[:-1], tokens[-1].split(MASK)[0]
        if not any(len(o) > len(tokens) and o[:len(head)] == head and o[len(head)].startswith(stem)
                   for o in whole.get(tokens[0], ())):
            out[i] = n
    return out


def score_events(parsed: ParsedJob, candidates: list[int], *, known: Sequence[KnownSignature] = (),
                 history: bool = False, clock: Sequence[ClockNote] = (), lift: LiftModel | None = None
                 ) -> list[ScoredEvent]:
    """Every candidate scored, best first. `known`: fault signatures whose matches are evidence;
    `history`: the candidates were filtered against history jobs (precursors are read); `clock`: the
    job's clock notes (`engine.quiet`); `lift`: a learned severity model (`engine.root_severity`; the
    engine passes none, `l4 bench root-model severity-cv` does)."""
    n_nodes = max(1, len(parsed.node_counts))
    cut_tails = crash_tails(parsed)
    sev_of: dict[int, float] = {}
    spec_of: dict[int, float] = {}
    for i in candidates:
        t = parsed.templates[i]
        k = max(1, len(t.nodes))
        spec_of[i] = 1.0 if n_nodes == 1 else 1.0 - (k - 1) / (n_nodes - 1)
        sev = severity(t.template, t.level)
        if cut_tails.get(i):  # the last words of a rank that died mid-line
            sev = max(sev, TRUNCATED_SEVERITY)
        sev_of[i] = sev
    roles: Roles = event_roles(parsed, candidates, sev_of)
    for i, inherited in roles.inherited.items():
        sev_of[i] = max(sev_of[i], inherited)
    for i, cap in roles.capped.items():
        sev_of[i] = min(sev_of[i], cap)
    for i in candidates:
        if roles.role.get(i) == CONSEQUENCE:
            sev_of[i] = min(sev_of[i], CONSEQUENCE_SEVERITY)
        elif i not in roles.role:  # a possible root cause in wording the lexicon does not know
            sev_of[i] = max(sev_of[i], learned_severity(parsed.templates[i], sev_of[i], lift))
    known_of = quiet_evidence(parsed, candidates, sev_of, roles.role, cascade=CASCADE, alarm=ROOT_SEVERITY,
                              known=known, history=history, clock=clock)
    for i in roles.restated:  # an account ranks as its restatement, which no signature names
        roles.role.pop(i, None)
    # one fault told in lines a signature names alike, close together: its best event shows them
    # together (engine.reports)
    for keeper, members in report_groups(parsed, candidates, known_of, sev_of, roles.role).items():
        roles.evidence[keeper] = shown_lines(parsed, members, roles.evidence.get(keeper, ()))
    # Echoes are damped only when a root cause is in sight: a severe event that is no echo, on few
    # nodes. With none (a silent hang, a killed rank), the timeouts and the launcher's report are the
    # best evidence there is.
    roots = [i for i in candidates
             if sev_of[i] >= ROOT_SEVERITY and i not in roles.role and spec_of[i] >= 0.5]
    # the one error in sight, logged by every node (a config error every rank hits), is a root cause
    # in sight too: being everywhere does not make it an echo
    severe = [i for i in candidates if sev_of[i] >= ROOT_SEVERITY and i not in roles.role]
    has_root = bool(roots) or (len(severe) == 1 and len(parsed.templates[severe[0]].nodes) >= n_nodes)
    # a rank killed first (the launcher's block says so) is the origin: the others' errors echo it,
    # and its report is the evidence unless the killed rank's node logged a cause of its own
    killed = bool(roles.killed_nodes)
    if killed:
        has_root = any(roles.killed_nodes & parsed.templates[i].nodes.keys() for i in roots)
    if roles.blocks and not killed:  # the launcher saw every rank fail on its own: its reports add nothing
        for i in candidates:
            if roles.role.get(i) == REPORT:
                roles.role[i] = CONSEQUENCE
                sev_of[i] = min(sev_of[i], CONSEQUENCE_SEVERITY)
    elif not has_root:
        for i in candidates:
            if roles.role.get(i) == REPORT:
                sev_of[i] = max(sev_of[i], REPORT_SEVERITY)
    # a peer's closed connection follows the first sign of a failure: below any other severe event,
    # a wrapper too (`DistBackendError: NCCL error …`: the local rank's own failure, whatever it wraps),
    # unless its words say the other side went away as well
    gone_after = any(sev_of[i] >= ROOT_SEVERITY and roles.role.get(i) in (None, CASCADE, WRAPPER)
                     and i not in roles.disconnects for i in candidates)
    # no alarm anywhere (a run that hung at its end, one that stopped without an error): where its ranks
    # stopped is evidence, shown after the best-scored lines (select_events), never above them
    alarm = any(sev_of[i] >= ROOT_SEVERITY for i in candidates)
    quiet_ends = set() if alarm else set(last_words(parsed, candidates))
    out = []
    for i in candidates:
        t = parsed.templates[i]
        sev, spec, role = sev_of[i], spec_of[i], roles.role.get(i)
        rarity = 1.0 / (1.0 + math.log10(max(1, t.count)))
        if role == CASCADE and (killed or i in roles.late or (gone_after and i in roles.disconnects)):
            damp = CASCADE_FACTOR
        elif role == CASCADE:
            damp = CASCADE_FACTOR + CASCADE_SPEC * spec if has_root else 1.0
        elif role in FACTORS:
            damp = FACTORS[role] if has_root or (killed and role != REPORT) else ALONE[role]
        elif killed and not has_root and not roles.killed_nodes & t.nodes.keys():
            damp = CASCADE_FACTOR  # an error elsewhere after the kill: a consequence of it
        else:
            damp = 1.0
        score = sev * (0.6 + 0.25 * spec + 0.15 * rarity) * damp
        out.append(ScoredEvent(i, round(min(1.0, score), 4), sev, role in (CASCADE, CONSEQUENCE), role,
                               tuple(roles.evidence.get(i, ())),
                               tuple(sorted(roles.evidence_nodes.get(i, ()))), known_of.get(i),
                               i in quiet_ends))
    out.sort(key=lambda e: (-e.score, parsed.templates[e.id].first_seen or "~", e.id))
    return out


def select_events(scored: list[ScoredEvent]) -> list[ScoredEvent]:
    """The events worth reading: above the floor, near the best, at most MAX_EVENTS, and at most
    MAX_ECHOES echoes (cascades, summaries, wrappers, context) below a possible root cause, then the last
    words (`ScoredEvent.last_words`, flagged only where no candidate raises an alarm) not among them."""
    if not scored:
        return []
    top = scored[0].score
    floor = max(MIN_SCORE, RELATIVE * top)
    kept = [e for e in scored if e.score >= floor][:MAX_EVENTS]
    if not kept:  # a failed job where nothing reaches the floor: its best few, not an empty answer
        kept = [e for e in scored[:FALLBACK_EVENTS] if e.score >= max(FALLBACK_SCORE, RELATIVE * top)]
        kept = kept or scored[:1]
    # last words are flagged only in a job with no alarm (score_events): where its ranks stopped, last
    kept = kept + [e for e in scored if e.last_words and e not in kept][:MAX_EVENTS - len(kept)]
    if not any(e.role in (None, REPORT) and e.severity >= ROOT_SEVERITY for e in kept):
        return kept  # no root cause in sight: the echoes are the evidence
    out, echoes = [], 0
    for e in kept:
        if e.role not in (None, REPORT):
            echoes += 1
            if echoes > MAX_ECHOES:
                continue
        out.append(e)
    return out
