"""Plain dataclasses the engine returns; no Slack, no database."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from engine.decoration import Decoration

SCHEMA = "l4.diagnosis/v1"
STAGES = ("init", "data_loading", "model_loading", "training", "checkpointing", "teardown", "unknown")
LABELLED_STAGES = tuple(s for s in STAGES if s != "unknown")  # what a labelled case's truth names
CATEGORIES = (
    "hardware/network", "hardware/accelerator", "hardware/node", "hardware/storage",
    "user/configuration", "user/program-bug", "user/software-incompatibility",
    "user/misoperation", "framework", "platform",
)


# nodes scoring below this are like the others: reports do not list them as suspicious
NOTABLE_NODE_SCORE = 0.05


@dataclass
class TemplateStat:
    """One log event (Drain template) of a job, aggregated over all its rank files."""

    template: str
    count: int = 0
    level: str | None = None
    nodes: dict[str, int] = field(default_factory=dict)  # node -> count
    examples: list[str] = field(default_factory=list)  # raw lines, at most 3
    first_seen: str | None = None  # ISO-8601 timestamp of the earliest occurrence, when lines carry one
    last_seen: str | None = None
    stage: str = "unknown"


@dataclass
class Match:
    pattern_id: str
    title: str
    category: str
    remediation: str = ""
    evidence: list[str] = field(default_factory=list)
    kind: str = "root"  # "root" cause or "cascade" (a consequence of a fault elsewhere)


@dataclass
class Event:
    template: str
    score: float
    count: int
    level: str | None
    nodes: list[str]
    first_seen: str | None
    examples: list[str]
    known: str | None = None  # the id of the known fault signature its lines match, if any (optional in JSON)


@dataclass
class NodeFinding:
    node: str
    score: float
    events: list[str] = field(default_factory=list)


@dataclass
class IterationFinding:
    iteration: int
    score: float
    nodes: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)


@dataclass
class ClockNote:
    """A clock the timeline should not be trusted on: a node's steady offset from the others
    ("skew", seconds > 0: ahead) or a step back within its rank files ("backwards", seconds < 0); or
    a node whose naive stamps were read in the zone its offset-aware stamps show ("zone", seconds:
    how far they ran ahead in `L4_LOG_TZ`; the timeline is trusted)."""

    kind: str  # "skew" | "backwards" | "zone"
    node: str
    seconds: float
    note: str = ""


@dataclass
class Stats:
    files: int = 0
    lines: int = 0
    bytes: int = 0
    templates: int = 0
    seconds: float = 0.0
    long_lines_cut: int = 0
    binary_lines: int = 0  # lines with control bytes: counted, not templated
    free_text_lines: int = 0  # distinct lines grouped by their first words (engine/freetext.py); JSON: if any
    unreadable_files: list[str] = field(default_factory=list)  # "path: reason"
    empty_or_binary_files: list[str] = field(default_factory=list)  # "path: empty" | "path: not text ..."


@dataclass
class IterationSeries:
    """One rank file's per-iteration DTW distance to its previous window, for plots."""

    file: str
    node: str
    iterations: list[int] = field(default_factory=list)
    distances: list[float] = field(default_factory=list)
    mean: float = 0.0
    std: float = 0.0
    threshold: float = 0.0  # mean + SIGMA * std: above it an iteration is anomalous
    flagged: list[int] = field(default_factory=list)  # iterations above the threshold


@dataclass
class AnalysisDetail:
    """What the plots and reports show beyond the diagnosis proper (not part of l4.diagnosis/v1;
    stored with the diagnosis in the knowledge base as the optional key "detail")."""

    node_scores: dict[str, float] = field(default_factory=dict)  # every node, combined score
    heatmap_nodes: list[str] = field(default_factory=list)  # rows: the most suspicious nodes
    heatmap_events: list[str] = field(default_factory=list)  # columns: the selected events
    heatmap_counts: list[list[int]] = field(default_factory=list)  # [node][event] line counts
    iteration_series: list[IterationSeries] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict) -> AnalysisDetail:
        series = [IterationSeries(**s) for s in d.get("iteration_series", [])]
        return cls(node_scores=dict(d.get("node_scores", {})), heatmap_nodes=list(d.get("heatmap_nodes", [])),
                   heatmap_events=list(d.get("heatmap_events", [])),
                   heatmap_counts=[list(r) for r in d.get("heatmap_counts", [])], iteration_series=series)


@dataclass
class StackGroup:
    """Ranks whose stack dumps are the same (main thread, innermost frame first)."""

    frames: list[str]
    ranks: list[int] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    outlier: bool = False  # a small group outside the dominant one: its ranks are suspects


@dataclass
class HangFinding:
    """What flight-recorder dumps and stack dumps say about a hang (the diagnosis' `hang` section)."""

    summary: str  # one line for people
    sources: list[str] = field(default_factory=list)  # "flight_recorder", "stacks"
    kind: str | None = None  # mismatch | missing | no_dump | not_started | all_waiting | stack_outlier
    process_group: str | None = None
    collective: str | None = None  # the op it concerns, e.g. "nccl:all_reduce"
    sequence_id: int | None = None
    ranks: list[int] = field(default_factory=list)  # the culprit ranks
    nodes: list[str] = field(default_factory=list)  # their nodes
    ranks_without_dump: list[int] = field(default_factory=list)
    waiting_ranks: list[int] = field(default_factory=list)
    detail: str = ""
    last_sequence: dict[str, int] = field(default_factory=dict)  # rank -> last sequence id enqueued
    stack_groups: list[StackGroup] = field(default_factory=list)
    dumps: int = 0  # flight-recorder dumps read
    stacks: int = 0  # ranks with a stack dump


STAGE_BASES = ("timeline", "frame", "lexicon", "words", "rules")


@dataclass
class StageBasis:
    """What the stage rests on, so that a reader can weigh it (engine.stage_model.decide):
    `timeline`, the job's own lines place the failure (a counter or bar of the failing rank, its stage
    markers and checkpoint windows, the other ranks' positions); `frame`, the failing function of its
    traceback (`save_checkpoint`, `__del__`); `lexicon`, a framework's message or frame the stage lexicon
    knows, read where the learned model was unsure; `words`, the learned model's reading of the failure's
    words, with its `probability`; `rules`, the stage rules alone (no model, or no failing lines read)."""
    source: str
    probability: float | None = None  # the learned model's probability of the stage, for `words`


@dataclass
class Diagnosis:
    job_id: str
    status: str = "analyzed"  # "matched" | "analyzed"
    matches: list[Match] = field(default_factory=list)
    stage: str = "unknown"
    events: list[Event] = field(default_factory=list)
    nodes: list[NodeFinding] = field(default_factory=list)
    iterations: list[IterationFinding] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)
    # what a failure report said about the job (url, description, settings...), when one was given
    report: dict | None = None
    detail: AnalysisDetail | None = field(default=None, repr=False)
    # evidence from flight-recorder and stack dumps, when the job folder has them
    hang: HangFinding | None = None
    # the job_id job.json states when it differs from the job asked for: shown, never an identity
    job_label: str | None = None
    clock: list[ClockNote] = field(default_factory=list)  # skewed / backwards clocks (optional in JSON)
    stage_basis: StageBasis | None = None  # what `stage` rests on (optional in JSON)

    def to_dict(self, *, detail: bool = False) -> dict:
        """The l4.diagnosis/v1 JSON; with `detail`, also the plot data under "detail"."""
        d = asdict(self)
        for optional in ("report", "job_label", "hang", "stage_basis"):
            if d.get(optional) is None:
                d.pop(optional, None)
        if d.get("stage_basis") and d["stage_basis"].get("probability") is None:
            d["stage_basis"].pop("probability")
        if not d.get("clock"):
            d.pop("clock", None)
        for e in d["events"]:
            if e.get("known") is None:
                e.pop("known", None)
        if not d["stats"].get("free_text_lines"):
            d["stats"].pop("free_text_lines", None)
        if not detail or d.get("detail") is None:
            d.pop("detail", None)
        return {"schema": SCHEMA, **d}


@dataclass
class ParsedJob:
    """Everything the later stages (and the knowledge base's matcher) need from one parsed job."""

    job_id: str
    settings: dict = field(default_factory=dict)
    status: str | None = None  # from job.json: "failed" | "succeeded" | None
    templates: list[TemplateStat] = field(default_factory=list)  # index = event id
    # per node: event id -> count
    node_counts: dict[str, dict[int, int]] = field(default_factory=dict)
    # per rank file: (iteration, tuple of event ids in order, capped) for each iteration; a sequence
    # that reads like a list (engine.iterruns.IterationRuns: run-length encoded, small in memory)
    iterations: dict[str, Sequence[tuple[int, tuple[int, ...]]]] = field(default_factory=dict)
    file_nodes: dict[str, str] = field(default_factory=dict)  # rank file -> node
    # per node: last timestamp seen (ISO) and last iteration reached, for the silence signal
    node_last_ts: dict[str, str] = field(default_factory=dict)
    node_last_iter: dict[str, int] = field(default_factory=dict)
    # per rank file: event id -> (first line number, last line number), for stage attribution
    positions: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)
    file_lines: dict[str, int] = field(default_factory=dict)
    # per node: event id -> earliest timestamp on that node (events whose lines carry one)
    node_first_seen: dict[str, dict[int, str]] = field(default_factory=dict)
    # per node: event id -> whether its stamp in node_first_seen is naive (no offset; engine.clock)
    node_naive: dict[str, dict[int, bool]] = field(default_factory=dict)
    # event id -> number of rank files whose last line it is, cut off without a line end
    truncated_tails: dict[int, int] = field(default_factory=dict)
    stats: Stats = field(default_factory=Stats)
    root: str = ""  # the job folder, for evidence beside the logs (flight-recorder and stack dumps)
    # rank file -> what every line of it carries that is no part of the message (engine.decoration)
    file_decorations: dict[str, Decoration] = field(default_factory=dict)
    # rank file -> the main thread's frames of its last faulthandler dump, innermost first (engine.logstacks:
    # read in the scan pass, so that hang evidence needs no second read of the logs)
    fault_frames: dict[str, list[str]] = field(default_factory=dict)

    def decoration_of(self, path: str) -> Decoration | None:
        """The decoration the lines of rank file `path` carry (engine.decoration), if any."""
        return self.file_decorations.get(path)


def diagnosis_from_dict(d: dict) -> Diagnosis:
    """The `Diagnosis` of its l4.diagnosis/v1 JSON (as stored by the knowledge base); unknown keys
    are ignored, so older and newer JSON both load."""
    def pick(cls: type, data: dict) -> dict:
        names = getattr(cls, "__dataclass_fields__", {})
        return {k: v for k, v in (data or {}).items() if k in names}

    return Diagnosis(
        job_id=str(d.get("job_id") or ""),
        status=d.get("status") or "analyzed",
        matches=[Match(**pick(Match, m)) for m in d.get("matches") or []],
        stage=d.get("stage") or "unknown",
        events=[Event(**pick(Event, e)) for e in d.get("events") or []],
        nodes=[NodeFinding(**pick(NodeFinding, n)) for n in d.get("nodes") or []],
        iterations=[IterationFinding(**pick(IterationFinding, i)) for i in d.get("iterations") or []],
        stats=Stats(**pick(Stats, d.get("stats") or {})),
        report=d.get("report"),
        job_label=str(d["job_label"]) if d.get("job_label") else None,
        detail=AnalysisDetail.from_dict(d["detail"]) if isinstance(d.get("detail"), dict) else None,
        hang=_hang_from_dict(d["hang"]) if isinstance(d.get("hang"), dict) else None,
        clock=[ClockNote(**pick(ClockNote, c)) for c in d.get("clock") or [] if isinstance(c, dict)],
        stage_basis=_basis_from_dict(d.get("stage_basis")),
    )


def _basis_from_dict(d: object) -> StageBasis | None:
    if not isinstance(d, dict) or d.get("source") not in STAGE_BASES:
        return None
    prob = d.get("probability")
    return StageBasis(str(d["source"]), float(prob) if isinstance(prob, (int, float)) else None)


def _hang_from_dict(d: dict) -> HangFinding:
    names = HangFinding.__dataclass_fields__
    data = {k: v for k, v in d.items() if k in names and k != "stack_groups"}
    groups = [StackGroup(**{k: v for k, v in g.items() if k in StackGroup.__dataclass_fields__})
              for g in d.get("stack_groups") or [] if isinstance(g, dict)]
    return HangFinding(**{"summary": "", **data, "stack_groups": groups})
