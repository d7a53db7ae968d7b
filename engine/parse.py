"""Template mining: scans of rank files (see `scan`) → Drain3 templates shared by several jobs.

Only distinct pre-keys reach this stage. The first line of each is header-stripped, folded like
its key (so the template shows the words the key kept) and masked; identical masked messages are
memoised, and Drain3 runs only on a cache miss. Binary lines are counted, not templated. Parsing
a failed job together with its history jobs in one miner gives them one template vocabulary,
which cross-job filtering needs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from drain3 import TemplateMiner
from drain3.drain import Drain
from drain3.template_miner_config import TemplateMinerConfig

from engine.decoration import Decoration, job_evidence
from engine.executors import Executor, choose_executor
from engine.fold import BINARY_KEY, fold_text
from engine.freetext import FREE
from engine.headers import may_hold_record, naive_stamp, timestamp
from engine.ingest import JobSpec, discover
from engine.iterruns import IterationRuns
from engine.masking import MASK, mask
from engine.model import ParsedJob, Stats, TemplateStat
from engine.rules import load
from engine.scan import COARSE, FileScan, head_decoration, may_hold_number, message_level, scan_planned

MAX_CLUSTERS = 20000
LEAF_CAP = 16  # clusters per Drain leaf (token count + first tokens); then lines join the closest
LEAF_HARD_CAP = 4 * LEAF_CAP  # ... sharing a word with it; past this, the closest whatever they share
MEMO_CAP = 200_000  # pre-keys (and masked messages) remembered; the memo starts again beyond
COARSE_WORDS = 3  # words a coarse key's template shows (its lines share only their start)
MAX_EXAMPLES = 3
_LEVEL_RANK = {None: 0, "DEBUG": 1, "INFO": 2, "WARN": 3, "ERROR": 4, "FATAL": 5}

Progress = Callable[[int, int, int], None]  # (files done, files total, bytes done)


class _CappedDrain(Drain):
    """Drain whose leaves hold at most LEAF_CAP clusters: once a leaf is full, a line that matches
    none of them joins the most similar one (its template keeps the words they share), provided
    they share a word in the same place; one that shares none gets a cluster of its own, up to
    LEAF_HARD_CAP clusters in the leaf (past it, in text where nothing repeats, the most general
    template takes it, as Drain's tie-break does). Without the cap, lines that never repeat make
    every search scan a growing leaf (quadratic time); a full leaf is searched through an index of
    its templates' words by place, so only templates that share a word are compared.
    A message of one constant word ("MemoryError", "Killed") is its own template: such messages
    are found by the word itself and never join another (they all share one leaf, which would
    fill up and merge them into "<*>")."""

    singles: dict[str, int]  # one-word template -> its cluster id (set by new_miner)
    words: dict[int, dict[tuple[int, str], list[int]]]  # id(leaf) -> (place, word) -> cluster ids
    general: dict[int, int]  # id(leaf) -> its most general template's cluster (see _general)
    apart: dict[int, tuple[int, ...]]  # cluster id -> places of its keep-apart tokens (see _apart)

    def tree_search(self, root_node, tokens, sim_th, include_params):  # drain3's signature
        if len(tokens) == 1 and _constant(tokens[0]):
            cid = self.singles.get(tokens[0])
            return self.id_to_cluster.get(cid) if cid is not None else None
        leaf = self._leaf(root_node, tokens) if tokens else None
        if leaf is None or len(leaf.cluster_ids) < LEAF_CAP:
            return super().tree_search(root_node, tokens, sim_th, include_params)
        index = self.words.get(id(leaf), {})
        shared = sorted({cid for place, word in enumerate(tokens) for cid in index.get((place, word), ())})
        best, sim = self._closest(shared, tokens, include_params)  # ids in leaf order: Drain's tie-break
        if sim > 0:  # sim >= sim_th, or the closest of a full leaf
            self.general.pop(id(leaf), None)  # the line may give it more "<*>" than the general one
            return best
        if len(leaf.cluster_ids) < LEAF_HARD_CAP:
            return None
        return self._general(leaf)

    def _general(self, leaf):
        """The first of a leaf's templates with the most "<*>" (Drain's tie-break among templates
        that share nothing with a line). Remembered: lines that join it only make it more general."""
        cluster = self.id_to_cluster.get(self.general.get(id(leaf), -1))
        if cluster is None:
            clusters = [c for c in map(self.id_to_cluster.get, leaf.cluster_ids) if c is not None]
            cluster = max(clusters, key=lambda c: c.log_template_tokens.count(self.param_str), default=None)
            if cluster is not None:
                self.general[id(leaf)] = cluster.cluster_id
        return cluster

    def _leaf(self, root_node, tokens):
        """The leaf Drain's tree search reaches for `tokens` (None if there is none yet)."""
        node = root_node.key_to_child_node.get(str(len(tokens)))
        depth = 1
        for token in tokens:
            if node is None or depth >= self.max_node_depth or depth == len(tokens):
                break
            children = node.key_to_child_node
            node = children.get(token) or children.get(self.param_str)
            depth += 1
        return node

    def _closest(self, cluster_ids, tokens, include_params):
        best, best_sim, best_params = None, -1.0, -1
        own = _apart(tokens)
        for cid in cluster_ids:
            cluster = self.id_to_cluster.get(cid)
            if cluster is None:
                continue
            if own or cid in self.apart:
                template = cluster.log_template_tokens
                if any(template[i] != tokens[i] for i in (*own, *self.apart.get(cid, ()))):
                    continue  # a NaN where the template has a number, or the other way round
            sim, params = self.get_seq_distance(cluster.log_template_tokens, tokens, include_params)
            if sim > best_sim or (sim == best_sim and params > best_params):
                best, best_sim, best_params = cluster, sim, params
        return best, best_sim

    def add_seq_to_prefix_tree(self, root_node, cluster):  # drain3's signature
        tokens = cluster.log_template_tokens
        if len(tokens) == 1 and _constant(tokens[0]):
            if len(self.singles) >= MAX_CLUSTERS:  # drop those the cluster cache let go
                self.singles = {t: c for t, c in self.singles.items() if c in self.id_to_cluster}
            self.singles[tokens[0]] = cluster.cluster_id
            return
        super().add_seq_to_prefix_tree(root_node, cluster)
        places = _apart(tokens)
        if places:
            self.apart[cluster.cluster_id] = places
        leaf = self._leaf(root_node, tokens) if tokens else None
        if leaf is not None:  # templates only lose words later, so the index may only hold too many
            index = self.words.setdefault(id(leaf), {})
            for place, word in enumerate(tokens):
                if word != self.param_str:
                    index.setdefault((place, word), []).append(cluster.cluster_id)

    def fast_match(self, cluster_ids, tokens, sim_th, include_params):  # drain3's signature
        best, sim = self._closest(cluster_ids, tokens, include_params)
        return best if sim >= sim_th else None


@lru_cache(maxsize=1)
def _keep_apart() -> re.Pattern[str]:
    return re.compile(load("masking")["keep_apart"])


_MAY_BE_APART = re.compile(r"(?<![A-Za-z])(?:nan|NaN|NAN|inf|Inf|INF|infinity|Infinity)(?![A-Za-z])")


def _apart(tokens: Sequence[str]) -> tuple[int, ...]:
    """The places of `tokens` that hold a keep-apart value (masking.yaml: a NaN or an infinity where a
    number is printed): a template and a line must agree there to be one template."""
    if _MAY_BE_APART.search(" ".join(tokens)) is None:  # one search per line: nearly every line has none
        return ()
    rx = _keep_apart()
    return tuple(i for i, t in enumerate(tokens) if rx.match(t))


def _constant(token: str) -> bool:
    """A token that is no variable: masking and folding left no "<*>" in it."""
    return MASK not in token


def new_miner(sim_th: float = 0.6, depth: int = 5, max_clusters: int = MAX_CLUSTERS) -> TemplateMiner:
    """A Drain3 miner for already-masked messages (masking is done once, in `masking`)."""
    cfg = TemplateMinerConfig()
    cfg.profiling_enabled = False
    cfg.drain_sim_th = sim_th
    cfg.drain_depth = depth
    cfg.drain_max_clusters = max_clusters
    cfg.mask_prefix = "<"
    cfg.mask_suffix = ">"
    cfg.parametrize_numeric_tokens = True
    cfg.masking_instructions = []
    miner = TemplateMiner(config=cfg)
    miner.drain.__class__ = _CappedDrain  # the same state, with capped leaves
    miner.drain.singles = {}
    miner.drain.words = {}
    miner.drain.general = {}
    miner.drain.apart = {}
    return miner


@dataclass
class KeyInfo:
    cluster: int
    level: str | None


class TemplateTable:
    """Pre-key → Drain cluster, memoised by masked message."""

    def __init__(self, miner: TemplateMiner | None = None) -> None:
        self.miner = miner or new_miner()
        self.by_key: dict[bytes, KeyInfo] = {}
        self.by_decorated: dict[Decoration, dict[bytes, KeyInfo]] = {}  # the keys of decorated files
        self.by_masked: dict[str, int] = {}

    def lookup(self, key: bytes, line: bytes, decoration: Decoration | None = None) -> KeyInfo:
        """The cluster of pre-key `key`, whose first line in some file is `line` (in a file whose
        lines carry `decoration`, `engine.decoration`)."""
        by_key = self.by_key if decoration is None else self.by_decorated.setdefault(decoration, {})
        info = by_key.get(key)
        if info is None:
            text = line.decode("utf-8", "replace")
            message, level = message_level(text, decoration)
            if key.startswith(FREE):  # distinct lines of free text, grouped by their frequent first words
                masked = _free_template(key, text, message)
            else:
                masked = mask(fold_text(message)) or MASK
            if key.startswith(COARSE):  # lines of a crowded file grouped by their start only
                masked = " ".join([*masked.split()[:COARSE_WORDS if len(key) > 1 else 0], MASK])
            cid = self.by_masked.get(masked)
            if cid is None:
                cid = self.miner.add_log_message(masked)["cluster_id"]
                if len(self.by_masked) >= MEMO_CAP:
                    self.by_masked.clear()
                self.by_masked[masked] = cid
            info = KeyInfo(cid, level)
            if len(by_key) >= MEMO_CAP:
                by_key.clear()
            by_key[key] = info
        return info

    def template(self, cluster_id: int) -> str:
        cluster = self.miner.drain.id_to_cluster.get(cluster_id)
        return cluster.get_template() if cluster is not None else MASK


def _free_template(key: bytes, line: str, message: str) -> str:
    """The template of a free key (engine/freetext.py): the words its lines share at their start
    (the key's literal words, less the header the message does not show), then "<*>". A structured
    line's message sits inside it (`engine.jsonlog`): its header is what stands before the message's
    first word (a word the field's opening quote is glued to counts as the message's)."""
    header_words = len(line.split()) - len(message.split())
    if message and not line.rstrip().endswith(message) and may_hold_record(line):
        start = line.find(message.split()[0])
        if start < 0:
            return MASK
        before = line[:start]
        header_words = len(before.split()) - (1 if before and not before[-1].isspace() else 0)
    keep = max(0, len(key[len(FREE):].split()) - header_words)
    shared = mask(fold_text(" ".join(message.split()[:keep]))) if keep else ""
    return f"{shared} {MASK}" if shared else MASK


def parse_jobs(
    jobs: Sequence[JobSpec | Path | str],
    *,
    executor: Executor | None = None,
    progress: Progress | None = None,
    table: TemplateTable | None = None,
) -> list[ParsedJob]:
    """Parse several jobs with one template vocabulary (the first is usually the failed job)."""
    started = time.perf_counter()
    specs = [j if isinstance(j, JobSpec) else discover(j) for j in jobs]
    files = [(i, f) for i, spec in enumerate(specs) for f in spec.files]
    total_bytes = sum(f.size for _, f in files)
    executor = executor or choose_executor(total_bytes, len(files))
    table = table or TemplateTable()
    builders = [_JobBuilder(spec) for spec in specs]
    done_bytes = 0
    # one decision over the failed job and its history: the same line decoration is read alike in
    # per-rank files and in a console (engine.decoration.learn_job). What each file shows on its own
    # is read on the executor's workers, then each file is decided and scanned there (scan_planned)
    rank_files = [f for _, f in files]
    own = list(executor.map(head_decoration, rank_files))
    job = job_evidence(own)
    items = [(f, mine, job) for f, mine in zip(rank_files, own, strict=True)]
    for done, scan in enumerate(executor.map(scan_planned, items), start=1):
        builders[files[done - 1][0]].add(scan, table)
        done_bytes += scan.bytes
        if progress:
            progress(done, len(files), done_bytes)
    elapsed = time.perf_counter() - started
    return [b.finish(table, elapsed) for b in builders]


def parse_job(
    job: JobSpec | Path | str, *, executor: Executor | None = None, progress: Progress | None = None
) -> ParsedJob:
    """Parse one job on its own."""
    return parse_jobs([job], executor=executor, progress=progress)[0]


class _JobBuilder:
    """Accumulates the scans of one job into a ParsedJob (templates indexed by Drain cluster)."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.stats = Stats(unreadable_files=list(spec.refused))
        self.by_cluster: dict[int, TemplateStat] = {}
        self.levels: dict[int, str | None] = {}
        self.node_counts: dict[str, dict[int, int]] = {}
        self.iterations: dict[str, IterationRuns] = {}
        self.file_nodes: dict[str, str] = {}
        self.node_last_ts: dict[str, str] = {}
        self.node_last_iter: dict[str, int] = {}
        self.positions: dict[str, dict[int, tuple[int, int]]] = {}  # file -> cluster -> (first, last) line
        self.file_lines: dict[str, int] = {}
        self.node_first_seen: dict[str, dict[int, str]] = {}
        self.node_naive: dict[str, dict[int, bool]] = {}
        self.truncated_tails: dict[int, int] = {}
        self.decorations: dict[str, Decoration] = {}
        self.fault_frames: dict[str, list[str]] = {}

    def add(self, scan: FileScan, table: TemplateTable) -> None:
        st = self.stats
        st.files += 1
        st.lines += scan.lines
        st.bytes += scan.bytes
        st.long_lines_cut += scan.long_lines_cut
        if scan.error:
            st.unreadable_files.append(f"{scan.path}: {scan.error}")
        elif scan.lines == 0:
            st.empty_or_binary_files.append(f"{scan.path}: empty (no log lines)")
        if scan.binary:
            st.empty_or_binary_files.append(f"{scan.path}: not text (binary bytes; read anyway, "
                                            f"{scan.lines} lines)")
        self.file_nodes[scan.path] = scan.node
        if scan.decoration is not None:
            self.decorations[scan.path] = scan.decoration
        self.file_lines[scan.path] = scan.lines
        if scan.fault_frames:
            self.fault_frames[scan.path] = scan.fault_frames
        ncounts = self.node_counts.setdefault(scan.node, {})
        local_to_cluster: list[int | None] = []
        pos = self.positions.setdefault(scan.path, {})
        node_first = self.node_first_seen.setdefault(scan.node, {})
        node_naive = self.node_naive.setdefault(scan.node, {})
        for lid, key in enumerate(scan.keys):
            count = scan.counts[lid]
            if key == BINARY_KEY:
                st.binary_lines += count
                local_to_cluster.append(None)
                continue
            if key.startswith(FREE):
                st.free_text_lines += count
            info = table.lookup(key, scan.first_line[lid], scan.decoration)
            cid = info.cluster
            local_to_cluster.append(cid)
            ncounts[cid] = ncounts.get(cid, 0) + count
            stat = self.by_cluster.get(cid)
            if stat is None:
                stat = self.by_cluster[cid] = TemplateStat(template="")
            stat.count += count
            stat.nodes[scan.node] = stat.nodes.get(scan.node, 0) + count
            if _LEVEL_RANK.get(info.level, 0) > _LEVEL_RANK.get(self.levels.get(cid), 0):
                self.levels[cid] = info.level
            raw = scan.first_line[lid]
            line = raw.decode("utf-8", "replace")
            self._add_example(stat, line.rstrip("\r"))  # a CRLF file's line end is not part of the line
            ts = timestamp(line, scan.year, decoration=scan.decoration) if may_hold_number(raw) else None
            if ts:
                if stat.first_seen is None or ts < stat.first_seen:
                    stat.first_seen = ts
                if ts < node_first.get(cid, "~"):
                    node_first[cid] = ts
                    node_naive[cid] = bool(naive_stamp(line if scan.decoration is None
                                                       else scan.decoration.strip(line)))
            if count > 1:
                last_raw = scan.last_line[lid]
                ts = (timestamp(last_raw.decode("utf-8", "replace"), scan.year, decoration=scan.decoration)
                      if may_hold_number(last_raw) else None)
            if ts and (stat.last_seen is None or ts > stat.last_seen):
                stat.last_seen = ts
            first, last = scan.first_pos[lid], scan.last_pos[lid]
            old = pos.get(cid)
            pos[cid] = (first, last) if old is None else (min(old[0], first), max(old[1], last))
        tail = local_to_cluster[scan.truncated_tail] if scan.truncated_tail is not None else None
        if tail is not None:
            self.truncated_tails[tail] = self.truncated_tails.get(tail, 0) + 1
        if scan.runs:
            seqs = [tuple(c for c in (local_to_cluster[i] for i in seq) if c is not None)
                    for seq in scan.seqs]
            its = self.iterations[scan.path] = IterationRuns(scan.runs, seqs)
            last_iter = its.max_iteration()
            assert last_iter is not None
            self.node_last_iter[scan.node] = max(self.node_last_iter.get(scan.node, last_iter), last_iter)
        if scan.last_ts and scan.last_ts > self.node_last_ts.get(scan.node, ""):
            self.node_last_ts[scan.node] = scan.last_ts

    @staticmethod
    def _add_example(stat: TemplateStat, line: str) -> None:
        if line in stat.examples or len(stat.examples) >= MAX_EXAMPLES:
            return
        stat.examples.append(line)

    def finish(self, table: TemplateTable, elapsed: float) -> ParsedJob:
        cluster_ids = sorted(self.by_cluster)
        index = {cid: i for i, cid in enumerate(cluster_ids)}
        templates = []
        for cid in cluster_ids:
            stat = self.by_cluster[cid]
            stat.template = table.template(cid)
            stat.level = self.levels.get(cid)
            templates.append(stat)
        self.stats.templates = len(templates)
        self.stats.seconds = round(elapsed, 3)
        parsed = ParsedJob(
            job_id=self.spec.job_id,
            settings=self.spec.settings,
            status=self.spec.status,
            templates=templates,
            node_counts={
                n: {index[c]: v for c, v in counts.items()} for n, counts in self.node_counts.items()
            },
            iterations={f: its.map_seqs(lambda seq: tuple(index[c] for c in seq))
                        for f, its in self.iterations.items()},
            file_nodes=self.file_nodes,
            node_last_ts=self.node_last_ts,
            node_last_iter=self.node_last_iter,
            positions={f: {index[c]: v for c, v in p.items()} for f, p in self.positions.items()},
            file_lines=self.file_lines,
            truncated_tails={index[c]: v for c, v in self.truncated_tails.items()},
            node_first_seen={
                n: {index[c]: ts for c, ts in d.items()} for n, d in self.node_first_seen.items()
            },
            node_naive={n: {index[c]: v for c, v in d.items()} for n, d in self.node_naive.items()},
            stats=self.stats,
            root=str(self.spec.root),
            file_decorations=self.decorations,
            fault_frames=self.fault_frames,
        )
        return parsed
