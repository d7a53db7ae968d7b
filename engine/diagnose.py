"""The L4 pipeline: parse → cross-job filter → rank events → spatial → temporal → Diagnosis."""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from engine.clock import clock_notes, settle_years, settle_zones, timeline_trusted
from engine.events import MIN_SCORE, ScoredEvent, score_events, select_events
from engine.executors import Executor
from engine.filter import NormalPool, candidate_events, normal_pool
from engine.hang import collect_hang, raise_culprits
from engine.ingest import JobSpec
from engine.known import KnownSignature
from engine.model import AnalysisDetail, ClockNote, Diagnosis, Event, IterationSeries, ParsedJob
from engine.parse import Progress, parse_jobs
from engine.spatial import rank_nodes
from engine.stage import stage_answer
from engine.temporal import anomalous_iterations


def analyze(parsed: ParsedJob, history: Sequence[ParsedJob] = (), *, normal: Iterable[str] = (),
            top_nodes: int = 5, pool: NormalPool | None = None, hang_evidence: bool = True,
            known: Sequence[KnownSignature] = ()) -> Diagnosis:
    """A diagnosis of an already parsed failed job, given parsed history jobs and known-normal templates.

    `pool`: the cross-job filter already built from `history` and `normal` (`normal_pool`), for a
    caller that needs it too; then `history` and `normal` are not read for filtering.
    `hang_evidence`: read the job folder's flight-recorder and stack dumps (`engine.hang`).
    `known`: fault signatures (e.g. the knowledge base's library) whose matches are evidence for the
    ranking (`engine.known`); without them the ranking reads the job alone."""
    started = time.perf_counter()
    zones, clock, candidates, scored = score_job(parsed, history, normal=normal, pool=pool, known=known)
    selected = select_events(scored)
    events = [_event(parsed, e.id, e.score, e.evidence, e.known) for e in selected]
    node_scores: dict[str, float] = {}
    # events shown only because none reached the floor (select_events' fallback) are no node evidence
    trusted = [e for e in selected if e.score >= MIN_SCORE]
    nodes = rank_nodes(parsed, candidates, scored, trusted, top_k=top_nodes, all_scores=node_scores,
                       clock=clock)
    hang = collect_hang(parsed) if hang_evidence else None
    nodes = raise_culprits(nodes, hang, top_k=top_nodes)
    node_scores.update({n.node: n.score for n in nodes if n.score > node_scores.get(n.node, 0.0)})
    weight = {e.id: e.score for e in scored}
    series: list[IterationSeries] = []
    iterations = anomalous_iterations(parsed, weight, series=series)
    stage, basis = stage_answer(parsed, [e.id for e in selected], trust_time=timeline_trusted(clock))
    stats = parsed.stats
    stats.seconds = round(stats.seconds + time.perf_counter() - started, 3)
    detail = _detail(parsed, node_scores, [e.id for e in selected], series, iterations)
    return Diagnosis(job_id=parsed.job_id, status="analyzed", stage=stage, events=events, nodes=nodes,
                     iterations=iterations, stats=stats, detail=detail, hang=hang, clock=zones + clock,
                     stage_basis=basis)


def score_job(parsed: ParsedJob, history: Sequence[ParsedJob] = (), *, normal: Iterable[str] = (),
              pool: NormalPool | None = None, known: Sequence[KnownSignature] = ()
              ) -> tuple[list[ClockNote], list[ClockNote], list[int], list[ScoredEvent]]:
    """`analyze`'s first steps: years and zones settled (the zone notes returned), the clock notes, the
    candidate events (those no history job or `normal` template shows) and their scores, best first."""
    settle_years(parsed)
    zones = settle_zones(parsed)  # naive stamps in their node's zone: not a clock to distrust
    pool = pool if pool is not None else normal_pool(history, normal)
    candidates = candidate_events(parsed, pool)
    clock = clock_notes(parsed)
    scored = score_events(parsed, candidates, known=known, history=bool(pool.exact), clock=clock)
    return zones, clock, candidates, scored


HEATMAP_NODES = 12
HEATMAP_EVENTS = 12
PLOTTED_SERIES = 3


def _detail(parsed: ParsedJob, node_scores: dict[str, float], selected: list[int],
            series: list[IterationSeries], iterations: list) -> AnalysisDetail:
    """Plot data: all node scores, a node × event count matrix of the top nodes, and the iteration
    series of the rank files where the most anomalous iterations were seen, the most suspicious
    nodes' files first (else the most suspicious node's first file)."""
    rows = list(node_scores)[:HEATMAP_NODES]
    cols = selected[:HEATMAP_EVENTS]
    counts = [[parsed.node_counts.get(n, {}).get(e, 0) for e in cols] for n in rows]
    wanted = [f.iteration for f in iterations]
    rank = {it: i for i, it in enumerate(wanted)}

    def best(s: IterationSeries) -> int:
        return min((rank[i] for i in s.flagged if i in rank), default=len(rank))

    node_rank = {n: i for i, n in enumerate(node_scores)}

    def suspicion(s: IterationSeries) -> int:
        return node_rank.get(s.node, len(node_rank))

    hit = sorted((s for s in series if any(i in rank for i in s.flagged)),
                 key=lambda s: (best(s), suspicion(s), s.file))
    kept = hit[:PLOTTED_SERIES] or sorted(series, key=lambda s: (suspicion(s), s.file))[:1]
    return AnalysisDetail(node_scores=node_scores, heatmap_nodes=rows,
                          heatmap_events=[parsed.templates[e].template for e in cols],
                          heatmap_counts=counts, iteration_series=kept)


def _event(parsed: ParsedJob, eid: int, score: float, evidence: Sequence[str] = (),
           known: str | None = None) -> Event:
    t = parsed.templates[eid]
    examples = list(dict.fromkeys([*evidence, *t.examples]))[:3]  # the lines that matter first
    return Event(template=t.template, score=score, count=t.count, level=t.level,
                 nodes=sorted(t.nodes, key=lambda n: (-t.nodes[n], n)), first_seen=shown_ts(t.first_seen),
                 examples=examples, known=known)


def shown_ts(ts: str | None) -> str | None:
    """An engine timestamp as shown: whole seconds lose their zero fraction (`…:31Z`, not `…:31.000000Z`)."""
    return ts.replace(".000000Z", "Z") if ts else ts


def diagnose(job: JobSpec | Path | str, history: Sequence[JobSpec | Path | str] = (), *,
             normal: Iterable[str] = (), executor: Executor | None = None,
             progress: Progress | None = None, top_nodes: int = 5,
             known: Sequence[KnownSignature] = ()) -> Diagnosis:
    """Parse the failed `job` with its `history` jobs in one vocabulary and analyse it (`known`: see
    `analyze`)."""
    parsed = parse_jobs([job, *history], executor=executor, progress=progress)
    return analyze(parsed[0], parsed[1:], normal=normal, top_nodes=top_nodes, known=known)
