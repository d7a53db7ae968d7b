"""One failed job's analysis from its folders to what the knowledge base needs, as plain data.

`analyse_job` parses the failed job with its history, filters it against their normal events and the
knowledge base's normal pool (template texts the caller read from its database), runs the engine,
and returns a `JobAnalysis`: the diagnosis, the events no normal job shows (what the fault patterns
are matched against) and the failed job's per-node evidence the signal patterns read. It takes
paths and returns dataclasses, so it runs the same in the caller's process and on a Dask worker
(`engine.executor_dask.analyse_on_worker`); matching and storing stay with the caller.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from engine.diagnose import analyze
from engine.filter import candidate_events, normal_pool
from engine.ingest import JobError, JobSpec
from engine.known import KnownSignature
from engine.model import Diagnosis, ParsedJob, TemplateStat

Parse = Callable[[list[JobSpec]], list[ParsedJob]]


@dataclass
class JobAnalysis:
    diagnosis: Diagnosis
    fresh: list[TemplateStat]  # the failed job's events that no normal job shows
    # the failed job without its per-file detail: nodes (node_counts keys, empty counts), last
    # timestamp and iteration per node; what kb.signals reads
    evidence: ParsedJob
    started: float  # time.time() when the analysis started and ended (where it ran)
    finished: float


def analyse_job(job: JobSpec, history: Sequence[JobSpec], pool: Iterable[str], *, parse: Parse,
                top_nodes: int = 5, known: Sequence[KnownSignature] = ()) -> JobAnalysis:
    """Analyse `job` (see the module doc); `parse` parses the jobs (e.g. `engine.parse.parse_jobs`
    with an executor); `known`: fault signatures the ranking reads as evidence (`engine.known`).
    Raises JobError when the job has no log lines."""
    started = time.time()
    parsed = parse([job, *history])
    failed = parsed[0]
    if failed.stats.lines == 0:  # nothing to diagnose: bad input, not an empty diagnosis
        st = failed.stats
        why = "; ".join((st.unreadable_files + st.empty_or_binary_files)[:2])
        raise JobError(f"no log lines in {job.root}: its {st.files} file(s) are empty or unreadable"
                       + (f" ({why})" if why else ""))
    normal = normal_pool(parsed[1:], pool)  # one filter for the engine and the pattern match
    diagnosis = analyze(failed, parsed[1:], top_nodes=top_nodes, pool=normal, known=known)
    fresh = [failed.templates[i] for i in candidate_events(failed, normal)]
    evidence = ParsedJob(job_id=failed.job_id, settings=dict(failed.settings), status=failed.status,
                         node_counts={n: {} for n in failed.node_counts},
                         node_last_ts=dict(failed.node_last_ts), node_last_iter=dict(failed.node_last_iter),
                         stats=failed.stats, root=failed.root)
    return JobAnalysis(diagnosis, fresh, evidence, started, time.time())
