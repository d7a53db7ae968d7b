"""A readable terminal report of a diagnosis (rich)."""
from __future__ import annotations

from io import StringIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from engine.model import NOTABLE_NODE_SCORE, Diagnosis


def render_text(d: Diagnosis, color: bool = False, width: int = 120) -> str:
    buf = StringIO()
    con = Console(file=buf, force_terminal=color, width=width, no_color=not color, highlight=False)
    st = d.stats
    con.print(f"[bold]L4 diagnosis of {escape(d.job_id)}[/bold]  ({d.status})")
    if d.job_label:
        con.print(f"job.json calls it {escape(d.job_label)}")
    con.print(f"{st.files} files, {st.lines:,} lines, {st.bytes / 1e6:.1f} MB, {st.templates} templates, "
              f"{st.seconds:.1f} s")
    if d.report:  # what the failure report said
        con.print(f"Failure report: {escape(str(d.report.get('url', '')))}")
        if d.report.get("description"):
            con.print(f"  {escape(str(d.report['description'])[:500])}")
    for m in d.matches:
        con.print(f"\n[bold red]Known fault:[/bold red] {escape(m.title)} [{escape(m.category)}] "
                  f"(pattern {escape(m.pattern_id)})")
        if m.remediation:
            con.print(f"  Remediation: {escape(m.remediation)}")
        for line in m.evidence[:3]:
            con.print(f"  > {escape(line[:300])}")
    con.print(f"\n[bold]Stage:[/bold] {d.stage}")
    if d.hang:  # flight-recorder and stack dumps
        con.print(f"[bold]Hang:[/bold] {escape(d.hang.summary[:500])}")
    if d.events:
        con.print("\n[bold]Failure-indicating events[/bold] (most indicative first)")
        for k, e in enumerate(d.events, start=1):
            nodes = ", ".join(e.nodes[:4]) + (f" +{len(e.nodes) - 4}" if len(e.nodes) > 4 else "")
            con.print(f"{k:2d}. [{e.score:.2f}] {escape(e.template[:300])}")
            con.print(f"     {e.count}× {e.level or '-'} on {escape(nodes)}"
                      + (f", first {e.first_seen}" if e.first_seen else ""))
            if e.examples:
                con.print(f"     e.g. {escape(e.examples[0][:300])}")
    else:
        con.print("\nNo failure-indicating events found.")
    notable = [n for n in d.nodes if n.score >= NOTABLE_NODE_SCORE]
    if notable:
        table = Table(title="Suspicious nodes", show_edge=False)
        table.add_column("node")
        table.add_column("score", justify="right")
        table.add_column("why")
        for n in notable:
            table.add_row(escape(n.node), f"{n.score:.2f}", escape("; ".join(n.events[:2])[:200]))
        con.print()
        con.print(table)
    elif d.nodes:
        con.print("\nSuspicious nodes: none stands out (every node scores below "
                  f"{NOTABLE_NODE_SCORE:.2f}).")
    if d.iterations:
        it = d.iterations[0]
        con.print(f"\n[bold]Anomalous iteration:[/bold] {it.iteration} (score {it.score:.2f}) on "
                  f"{escape(', '.join(it.nodes[:5]))}")
        for t in it.events[:3]:
            con.print(f"  + {escape(t[:200])}")
    if st.unreadable_files:
        con.print(f"\n[yellow]{len(st.unreadable_files)} file(s) could not be read to the end:[/yellow]")
        for f in st.unreadable_files[:10]:
            con.print(f"  {escape(f)}")
    if st.long_lines_cut:
        con.print(f"{st.long_lines_cut} over-long line(s) were cut at 64 KiB.")
    return buf.getvalue()
