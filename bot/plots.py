"""PNG plots of a diagnosis and of a digest (matplotlib, Agg backend, no pyplot).

Every function takes plain data and returns PNG bytes of a fixed size (``WIDTH`` × ``HEIGHT``
pixels). Figures are built with the object API (``matplotlib.figure.Figure``), so plots can be
drawn from several threads of the bot at once. Labels are shortened and ``$`` is escaped (no
mathtext from log text).
"""
from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before anything imports pyplot; this module never does

from matplotlib.figure import Figure  # noqa: E402

from engine.model import AnalysisDetail, Diagnosis, HangFinding, IterationSeries  # noqa: E402

DPI = 100
WIDTH, HEIGHT = 960, 540  # pixels of every PNG
TOP_NODES = 25  # bars in the node-score plot
SUSPICIOUS = 0.5  # node score from which the knowledge base records an incident
LABEL_CHARS = 38  # event labels longer than this are shortened
ANNOTATE_CELLS = 150  # heat maps with at most this many cells show the counts in the cells
_CTRL = re.compile(r"[\x00-\x1f\x7f]+")
_RED, _GREY, _BLUE = "#c0392b", "#95a5a6", "#2c6fbb"


def shorten(text: str, limit: int = LABEL_CHARS, *, keep_end: bool = False) -> str:
    """One line, at most ``limit`` characters (an ellipsis marks the cut, at the end or, with
    ``keep_end``, at the start), ``$`` escaped for matplotlib."""
    one = " ".join(_CTRL.sub(" ", str(text)).split())
    if len(one) > limit:
        keep = max(1, limit - 1)
        one = "…" + one[-keep:].lstrip() if keep_end else one[:keep].rstrip() + "…"
    return one.replace("$", r"\$")


def _figure() -> Figure:
    return Figure(figsize=(WIDTH / DPI, HEIGHT / DPI), dpi=DPI, layout="constrained")


def _png(fig: Figure, title: str) -> bytes:
    """PNG bytes; the title also goes into the PNG's metadata (tEXt "Title")."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*[Gg]lyph .* missing from.*")
        warnings.filterwarnings("ignore", message=r".*constrained_layout not applied.*")
        fig.savefig(buf, format="png", dpi=DPI, metadata={"Title": title, "Software": "L4"})
    return buf.getvalue()


def _empty(fig: Figure, title: str, message: str) -> bytes:
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, message, ha="center", va="center", fontsize=12, color="#555555", transform=ax.transAxes)
    return _png(fig, f"{title}: {message}")


def node_scores_png(scores: Mapping[str, float], *, top: int = TOP_NODES) -> bytes:
    """Horizontal bars of the ``top`` highest node anomaly scores (the title says when nodes are left out)."""
    fig = _figure()
    title = "Node anomaly scores"
    if not scores:
        return _empty(fig, title, "no node scores")
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ranked[:top]
    if len(ranked) > len(shown):
        title += f" (top {len(shown)} of {len(ranked):,} nodes)"
    ax = fig.add_subplot()
    names = [shorten(n, 28) for n, _ in reversed(shown)]
    values = [float(v) for _, v in reversed(shown)]
    ax.barh(range(len(values)), values, color=[_RED if v >= SUSPICIOUS else _GREY for v in values])
    ax.set_yticks(range(len(values)), names, fontsize=8 if len(values) > 12 else 10)
    ax.axvline(SUSPICIOUS, color="#333333", linestyle=":", linewidth=1)
    ax.text(SUSPICIOUS, 0.01, f" suspicious ≥ {SUSPICIOUS}", transform=ax.get_xaxis_transform(), fontsize=8,
            va="bottom", color="#333333")
    ax.set_xlim(0, max(1.0, max(values) * 1.05))
    ax.set_xlabel("score (0 = like the others, 1 = most anomalous)")
    ax.set_title(title)
    return _png(fig, title)


def hang_png(last_sequence: Mapping[str, int], culprits: Sequence[int], *, title_op: str = "") -> bytes:
    """Bars of the last collective sequence id each rank enqueued (flight recorder), culprits in red."""
    fig = _figure()
    title = "Last collective reached per rank" + (f" ({shorten(title_op, 40)})" if title_op else "")
    if not last_sequence:
        return _empty(fig, title, "no flight-recorder entries")
    ranks = sorted(last_sequence, key=lambda r: int(r) if str(r).lstrip("-").isdigit() else 0)
    values = [int(last_sequence[r]) for r in ranks]
    bad = {str(r) for r in culprits}
    ax = fig.add_subplot()
    ax.bar(range(len(values)), values, color=[_RED if str(r) in bad else _BLUE for r in ranks])
    step = max(1, math.ceil(len(ranks) / 32))
    ax.set_xticks(range(0, len(ranks), step), [str(r) for r in ranks[::step]], fontsize=8)
    low = min(values)
    ax.set_ylim(max(0, low - 3), max(values) + 1)
    ax.set_xlabel("rank (red: named by the dumps)")
    ax.set_ylabel("sequence id")
    ax.set_title(title)
    return _png(fig, title)


def iterations_png(series: Sequence[IterationSeries]) -> bytes:
    """Per-iteration DTW distance of each rank file, its three-sigma band and the flagged iterations."""
    fig = _figure()
    title = "Iteration similarity (DTW distance to the previous iterations)"
    drawn = [s for s in series if s.iterations]
    if not drawn:
        return _empty(fig, title, "no training iterations were found in the logs")
    axes = fig.subplots(len(drawn), 1, squeeze=False)[:, 0]
    for ax, s in zip(axes, drawn, strict=True):
        its, dist = list(s.iterations), [float(x) for x in s.distances]
        n = min(len(its), len(dist))
        its, dist = its[:n], dist[:n]
        width = max(0.0, s.threshold - s.mean)
        ax.fill_between([its[0], its[-1]], max(0.0, s.mean - width), s.threshold, color=_BLUE, alpha=0.12,
                        label="mean ± 3σ", linewidth=0)
        ax.axhline(s.mean, color=_BLUE, linestyle="--", linewidth=0.8)
        ax.axhline(s.threshold, color=_RED, linestyle=":", linewidth=1, label="threshold")
        ax.plot(its, dist, color="#333333", linewidth=1, marker="." if n <= 200 else None, markersize=3,
                label="distance")
        flagged = set(s.flagged)
        fx = [i for i in its if i in flagged]
        fy = [d for i, d in zip(its, dist, strict=True) if i in flagged]
        if fx:
            ax.scatter(fx, fy, color=_RED, zorder=3, s=28, label="flagged")
            for x, y in list(zip(fx, fy, strict=True))[:6]:
                ax.annotate(str(x), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8, color=_RED)
        name = s.file.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]  # the node says where it is
        ax.set_title(f"{shorten(s.node, 30)}: {shorten(name, 80, keep_end=True)}", fontsize=9, loc="left")
        ax.set_ylabel("distance", fontsize=8)
        ax.tick_params(labelsize=8)
    axes[-1].set_xlabel("iteration")
    axes[0].legend(fontsize=7, loc="upper left", ncols=4)
    fig.suptitle(title, fontsize=11)
    return _png(fig, title)


def heatmap_png(nodes: Sequence[str], events: Sequence[str], counts: Sequence[Sequence[int]]) -> bytes:
    """Node × event line counts (log colour scale) of the most suspicious nodes."""
    fig = _figure()
    title = "Lines per node and event"
    if not nodes or not events or not counts:
        return _empty(fig, title, "no node × event data")
    import numpy as np

    data = np.zeros((len(nodes), len(events)))
    for i, row in enumerate(counts[: len(nodes)]):
        for j, v in enumerate(list(row)[: len(events)]):
            data[i, j] = float(v)
    ax = fig.add_subplot()
    im = ax.imshow(np.log10(data + 1), aspect="auto", cmap="Reds", interpolation="nearest")
    ax.set_yticks(range(len(nodes)), [shorten(n, 24) for n in nodes], fontsize=8)
    ax.set_xticks(range(len(events)), [shorten(e) for e in events], fontsize=7, rotation=35, ha="right",
                  rotation_mode="anchor")
    if data.size <= ANNOTATE_CELLS:
        peak = data.max() or 1.0
        for (i, j), v in np.ndenumerate(data):
            if v:
                ax.text(j, i, f"{int(v):,}", ha="center", va="center", fontsize=7,
                        color="white" if math.log10(v + 1) > 0.6 * math.log10(peak + 1) else "black")
    bar = fig.colorbar(im, ax=ax, shrink=0.8)
    bar.set_label("log10(lines + 1)", fontsize=8)
    ax.set_title(title)
    return _png(fig, title)


def pattern_counts_png(day_starts: Sequence[datetime], pattern_days: Mapping[str, Sequence[int]],
                       titles: Mapping[str, str] | None = None, *,
                       window_start: datetime | None = None) -> bytes:
    """Diagnoses per day of each recurring fault pattern; a line marks where the current window starts."""
    fig = _figure()
    title = "Fault patterns per day"
    if not day_starts or not pattern_days or not any(sum(v) for v in pattern_days.values()):
        return _empty(fig, title, "no fault patterns in this period")
    from matplotlib.dates import DateFormatter, date2num

    ax = fig.add_subplot()
    xs = [date2num(d) for d in day_starts]  # one bar per 24-hour bin, at its start
    bottom = [0.0] * len(xs)
    for pid, counts in pattern_days.items():
        ys = [float(c) for c in list(counts)[: len(xs)]] + [0.0] * max(0, len(xs) - len(counts))
        label = shorten((titles or {}).get(pid) or pid, 48)
        ax.bar(xs, ys, width=0.8, bottom=bottom, align="edge", label=label)
        bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
    if window_start is not None:
        ax.axvline(date2num(window_start), color="#333333", linestyle=":", linewidth=1)
        ax.text(date2num(window_start), 0.98, " this window →", transform=ax.get_xaxis_transform(),
                fontsize=8, va="top")
    ax.set_ylabel("diagnoses per day")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_ylim(0, max(bottom) * 1.25 + 0.5)
    ax.xaxis.set_major_formatter(DateFormatter("%m-%d"))
    ax.tick_params(axis="x", labelsize=8)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title)
    return _png(fig, title)


def _detail_of(diagnosis: Diagnosis | Mapping[str, Any]) -> tuple[str, AnalysisDetail]:
    """Job id and plot data of a diagnosis or of its stored JSON (scores from "nodes" when there is no
    "detail", e.g. a diagnosis stored before detail was kept)."""
    if isinstance(diagnosis, Diagnosis):
        job, detail = diagnosis.job_id, diagnosis.detail
        nodes = {n.node: n.score for n in diagnosis.nodes}
    else:
        job = str(diagnosis.get("job_id") or "job")
        raw = diagnosis.get("detail")
        detail = AnalysisDetail.from_dict(raw) if isinstance(raw, Mapping) else None
        nodes = {str(n.get("node")): float(n.get("score") or 0.0) for n in diagnosis.get("nodes") or []
                 if isinstance(n, Mapping)}
    if detail is None:
        detail = AnalysisDetail(node_scores=nodes)
    elif not detail.node_scores:
        detail.node_scores = nodes
    return job, detail


def diagnosis_pngs(diagnosis: Diagnosis | Mapping[str, Any]) -> list[tuple[str, bytes]]:
    """(filename, PNG) of every plot a diagnosis has data for: node scores, iteration similarity,
    node × event heat map, ranks × last collective reached (hang evidence)."""
    job, detail = _detail_of(diagnosis)
    hang = diagnosis.hang if isinstance(diagnosis, Diagnosis) else diagnosis.get("hang")
    if isinstance(hang, Mapping):
        hang = _hang_of(hang)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", job)[:80] or "job"
    out: list[tuple[str, bytes]] = []
    if detail.node_scores:
        out.append((f"{stem}-node-scores.png", node_scores_png(detail.node_scores)))
    if any(s.iterations for s in detail.iteration_series):
        out.append((f"{stem}-iterations.png", iterations_png(detail.iteration_series)))
    if detail.heatmap_nodes and detail.heatmap_events:
        out.append((f"{stem}-node-event-heatmap.png",
                    heatmap_png(detail.heatmap_nodes, detail.heatmap_events, detail.heatmap_counts)))
    if hang is not None and hang.last_sequence:
        op = f"{hang.collective} #{hang.sequence_id}" if hang.collective else ""
        out.append((f"{stem}-hang.png", hang_png(hang.last_sequence, hang.ranks, title_op=op)))
    return out


def _hang_of(d: Mapping[str, Any]) -> HangFinding:
    return HangFinding(summary=str(d.get("summary") or ""), collective=d.get("collective"),
                       sequence_id=d.get("sequence_id"), ranks=list(d.get("ranks") or []),
                       last_sequence=dict(d.get("last_sequence") or {}))
