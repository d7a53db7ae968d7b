"""A self-contained HTML report of a diagnosis: one file, no external assets (inline CSS, plots
as ``data:`` URIs), every piece of log text HTML-escaped."""

from __future__ import annotations

import base64
import json
from html import escape

from bot.where import by_suspicion, listed, locate, stage_basis_phrase
from engine.model import NOTABLE_NODE_SCORE, Diagnosis, HangFinding

_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd;padding-bottom:2px}
code,pre{font:12px ui-monospace,monospace;background:#f5f5f5;padding:2px 4px}
pre{white-space:pre-wrap;word-break:break-all;padding:6px;margin:2px 0}
table{border-collapse:collapse;width:100%}
td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
.score{font-variant-numeric:tabular-nums}.match{border-left:4px solid #c33;padding-left:10px}
.cascade{border-left-color:#e0a030}nav a{margin-right:1em}figure{margin:1em 0}
figure img{max-width:100%;height:auto;border:1px solid #eee}figcaption{color:#555;font-size:.9em}
.muted{color:#777}footer{margin-top:3em;color:#777;font-size:.85em}"""

_PLOT_CAPTIONS = {
    "node-scores": "Node anomaly scores (Isolation Forest over node × event counts, evidence and silence).",
    "iterations": "Per-iteration DTW distance to the previous iterations; the band is mean ± 3σ, red points "
                  "are the flagged iterations.",
    "node-event-heatmap": "Lines per node and failure-indicating event for the most suspicious nodes.",
    "hang": "Flight recorder: the last collective sequence id each rank enqueued; red ranks are the ones "
            "the dumps name (they never reached, or desynced at, the collective the others wait in).",
}


def _table(head: list[str], rows: list[list[str]], empty: str) -> str:
    if not rows:
        return f"<p class='muted'>{escape(empty)}</p>"
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _plots(d: Diagnosis) -> list[str]:
    from bot.plots import diagnosis_pngs

    out = []
    for name, png in diagnosis_pngs(d):
        key = next((k for k in _PLOT_CAPTIONS if name.endswith(f"-{k}.png")), "")
        uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
        out.append(f"<figure><img src='{uri}' alt='{escape(name)}'><figcaption>"
                   f"{escape(_PLOT_CAPTIONS.get(key, name))}</figcaption></figure>")
    return out


def _report(report: dict) -> str:
    rows = []
    for k, v in report.items():
        text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, indent=1, default=str)
        rows.append([f"<b>{escape(str(k))}</b>", f"<pre>{escape(text)}</pre>"])
    return _table(["field", "value"], rows, "empty")


def _hang(h: HangFinding) -> str:
    rows = [[escape(", ".join(map(str, g.ranks))), escape(", ".join(g.nodes)),
             "<br>".join(f"<code>{escape(f)}</code>" for f in g.frames[:6]), "outlier" if g.outlier else ""]
            for g in h.stack_groups]
    return (f"<section id='hang'><h2>Hang</h2><p><b>{escape(h.summary)}</b></p>"
            f"<p class='muted'>from {escape(', '.join(h.sources))}: {h.dumps} flight-recorder dump(s), "
            f"{h.stacks} stack dump(s)</p>"
            + (_table(["ranks", "nodes", "stack (innermost first)", ""], rows, "") if rows else "")
            + "</section>")


def render_html(d: Diagnosis, *, plots: bool = True, diagnosis_id: int | None = None) -> str:
    """The whole diagnosis as one HTML page; with ``plots``, the plots of its analysis detail inline;
    with ``diagnosis_id``, the knowledge base's ID of it (what ``l4 patterns confirm`` takes)."""
    st = d.stats
    notable = [n for n in d.nodes if n.score >= NOTABLE_NODE_SCORE]
    quiet = [n for n in d.nodes if n.score < NOTABLE_NODE_SCORE]
    ident = f" {diagnosis_id}" if diagnosis_id is not None else ""
    figures = _plots(d) if plots else []
    sections = [("summary", "Summary")]
    if d.report:
        sections.append(("report", "Failure report"))
    if d.hang:
        sections.append(("hang", "Hang"))
    if d.matches:
        sections.append(("matches", "Known faults"))
    if figures:
        sections.append(("plots", "Plots"))
    sections += [("events", "Events"), ("nodes", "Nodes"), ("iterations", "Iterations")]
    if st.unreadable_files or st.empty_or_binary_files:
        sections.append(("unreadable", "Files not read"))
    phrase = stage_basis_phrase(d)
    basis = f" ({escape(phrase)})" if phrase else ""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<title>L4 diagnosis {escape(d.job_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>L4 diagnosis{ident} of {escape(d.job_id)} <small>({escape(d.status)})</small></h1>",
        f"<p>job.json calls it <code>{escape(d.job_label)}</code></p>" if d.job_label else "",
        f"<p class='where'><b>Where:</b> {escape(locate(d).line())}"
        + (f" · <b>Match:</b> {escape(d.matches[0].title)} (<code>{escape(d.matches[0].pattern_id)}</code>)"
           if d.matches else " · no known fault pattern matched") + "</p>"
        + (f"<p>Diagnosis ID <code id='diagnosis-id'>{diagnosis_id}</code>: confirm its root cause with "
           f"<code>l4 patterns confirm {diagnosis_id} …</code>.</p>" if diagnosis_id is not None else ""),
        "<nav>" + "".join(f"<a href='#{k}'>{escape(v)}</a>" for k, v in sections) + "</nav>",
        f"<section id='summary'><h2>Summary</h2><p>Stage: <b>{escape(d.stage)}</b>{basis}. "
        f"{len(d.matches)} known fault(s), {len(d.events)} failure-indicating event(s), "
        f"{len(notable)} suspicious node(s), "
        f"{len(d.iterations)} anomalous iteration(s).</p>"
        f"<p>{st.files} files, {st.lines:,} lines, {st.bytes / 1e6:.1f} MB, {st.templates} templates, "
        f"{st.seconds:.1f} s"
        + (f", {st.long_lines_cut:,} over-long lines cut" if st.long_lines_cut else "") + ".</p></section>",
    ]
    if d.report:
        parts.append(f"<section id='report'><h2>Failure report</h2>{_report(d.report)}</section>")
    if d.hang:
        parts.append(_hang(d.hang))
    if d.matches:
        parts.append("<section id='matches'><h2>Known faults</h2>")
        for m in d.matches:
            parts.append(
                f"<div class='match {escape(m.kind)}'><h3>{escape(m.title)}</h3><p>{escape(m.category)} — "
                f"{escape(m.kind)} cause, pattern <code>{escape(m.pattern_id)}</code></p>"
                f"<p><b>Remediation:</b> {escape(m.remediation)}</p>"
                + "".join(f"<pre>{escape(x)}</pre>" for x in m.evidence[:3]) + "</div>")
        parts.append("</section>")
    if figures:
        parts.append("<section id='plots'><h2>Plots</h2>" + "".join(figures) + "</section>")
    ev_rows = [[f"<span class='score'>{e.score:.2f}</span>", f"<code>{escape(e.template)}</code>",
                f"{e.count:,}", escape(e.level or "-"), escape(listed(by_suspicion(d, e.nodes), 8)),
                escape(e.first_seen or "-"), "".join(f"<pre>{escape(x)}</pre>" for x in e.examples[:3])]
               for e in d.events]
    parts.append("<section id='events'><h2>Failure-indicating events</h2>" + _table(
        ["score", "event", "count", "level", "nodes", "first seen", "examples"], ev_rows,
        "no failure-indicating events") + "</section>")
    node_rows = [[escape(n.node), f"<span class='score'>{n.score:.2f}</span>",
                  "<br>".join(f"<code>{escape(t)}</code>" for t in n.events[:5])
                  + (f" <span class='muted'>+{len(n.events) - 5} more</span>" if len(n.events) > 5 else "")]
                 for n in notable]
    others = (f"<p class='muted'>{len(quiet)} other node(s) score below {NOTABLE_NODE_SCORE:.2f}: "
              f"{escape(', '.join(n.node for n in quiet))}.</p>" if quiet else "")
    parts.append("<section id='nodes'><h2>Suspicious nodes</h2>"
                 + _table(["node", "score", "events"], node_rows, "no suspicious nodes") + others
                 + "</section>")
    it_rows = [[str(it.iteration), f"<span class='score'>{it.score:.2f}</span>",
                escape(listed(by_suspicion(d, it.nodes), 8)),
                "<br>".join(f"<code>{escape(t)}</code>" for t in it.events[:5])]
               for it in d.iterations]
    parts.append("<section id='iterations'><h2>Anomalous iterations</h2>"
                 + _table(["iteration", "score", "nodes", "new events"], it_rows, "no anomalous iterations")
                 + "</section>")
    bad_files = st.unreadable_files + st.empty_or_binary_files
    if bad_files:
        parts.append("<section id='unreadable'><h2>Files not read to the end, empty or not text</h2><ul>"
                     + "".join(f"<li>{escape(f)}</li>" for f in bad_files) + "</ul></section>")
    parts.append("<footer>Made by L4 (schema l4.diagnosis/v1). Confirm or correct the root cause with "
                 "<code>l4 patterns confirm</code> or in Slack.</footer></body></html>")
    return "\n".join(parts)
