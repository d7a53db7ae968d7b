"""A self-contained HTML report of a diagnosis (no external assets)."""

from __future__ import annotations

from html import escape

from engine.model import Diagnosis

_CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
h1{font-size:1.4em}code,pre{font:12px ui-monospace,monospace;background:#f5f5f5;padding:2px 4px}
pre{white-space:pre-wrap;word-break:break-all;padding:6px}table{border-collapse:collapse}
td,th{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}
.score{font-variant-numeric:tabular-nums}.match{border-left:4px solid #c33;padding-left:10px}"""


def render_html(d: Diagnosis) -> str:
    st = d.stats
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>L4 diagnosis {escape(d.job_id)}</title>"
        f"<style>{_CSS}</style></head><body>",
        f"<h1>L4 diagnosis of {escape(d.job_id)} <small>({escape(d.status)})</small></h1>",
        f"<p>{st.files} files, {st.lines:,} lines, {st.bytes / 1e6:.1f} MB, {st.templates} templates, "
        f"{st.seconds:.1f} s. Stage: <b>{escape(d.stage)}</b>.</p>",
    ]
    for m in d.matches:
        parts.append(
            f"<div class='match'><h2>Known fault: {escape(m.title)}</h2><p>{escape(m.category)} — "
            f"pattern <code>{escape(m.pattern_id)}</code></p><p>{escape(m.remediation)}</p>"
            + "".join(f"<pre>{escape(x)}</pre>" for x in m.evidence[:3])
            + "</div>"
        )
    parts.append(
        "<h2>Failure-indicating events</h2><table><tr><th>score</th><th>event</th><th>count</th>"
        "<th>nodes</th><th>example</th></tr>"
    )
    for e in d.events:
        parts.append(
            f"<tr><td class='score'>{e.score:.2f}</td><td><code>{escape(e.template)}</code></td>"
            f"<td>{e.count}</td><td>{escape(', '.join(e.nodes[:6]))}</td>"
            f"<td><pre>{escape(e.examples[0] if e.examples else '')}</pre></td></tr>"
        )
    parts.append(
        "</table><h2>Suspicious nodes</h2><table><tr><th>node</th><th>score</th><th>events</th></tr>"
    )
    for n in d.nodes:
        parts.append(
            f"<tr><td>{escape(n.node)}</td><td class='score'>{n.score:.2f}</td>"
            f"<td>{'<br>'.join(escape(t) for t in n.events[:3])}</td></tr>"
        )
    parts.append(
        "</table><h2>Anomalous iterations</h2><table><tr><th>iteration</th><th>score</th>"
        "<th>nodes</th><th>new events</th></tr>"
    )
    for it in d.iterations:
        parts.append(
            f"<tr><td>{it.iteration}</td><td class='score'>{it.score:.2f}</td>"
            f"<td>{escape(', '.join(it.nodes[:6]))}</td>"
            f"<td>{'<br>'.join(escape(t) for t in it.events[:3])}</td></tr>"
        )
    parts.append("</table>")
    if st.unreadable_files:
        parts.append(
            "<h2>Files not read to the end</h2><ul>"
            + "".join(f"<li>{escape(f)}</li>" for f in st.unreadable_files)
            + "</ul>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)
