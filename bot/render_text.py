"""A readable terminal report of a diagnosis (rich).

The top lines say where the failure sits (node, rank, stage, iteration) and what it matched. Every
list that is shortened says how many it left out; log text is on one line, control characters
escaped. On a terminal long lines wrap at the terminal's width; piped, lines are never wrapped.
"""
from __future__ import annotations

from io import StringIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bot.where import by_suspicion, cut, listed, locate, shown, stage_basis_phrase
from engine.model import NOTABLE_NODE_SCORE, Diagnosis

UNWRAPPED_WIDTH = 10_000  # piped output: tables as wide as their content, lines never wrapped


def _t(text: object, limit: int | None = None) -> str:
    """Log-derived text ready for rich: one line, cut visibly, markup escaped."""
    s = shown(text)
    return escape(cut(s, limit) if limit else s)


def render_text(d: Diagnosis, color: bool = False, width: int = 120, *, diagnosis_id: int | None = None,
                terminal: bool = False) -> str:
    """The report; `terminal` wraps at `width`, else nothing is wrapped (safe to pipe and grep)."""
    buf = StringIO()
    con = Console(file=buf, force_terminal=color, width=width if terminal else UNWRAPPED_WIDTH,
                  no_color=not color, highlight=False, soft_wrap=not terminal)
    st = d.stats
    ident = f" {diagnosis_id}" if diagnosis_id is not None else ""
    con.print(f"[bold]L4 diagnosis{ident} of {_t(d.job_id)}[/bold]  ({d.status})")
    if d.job_label:
        con.print(f"job.json calls it {_t(d.job_label)}")
    con.print(f"[bold]Where:[/bold] {_t(locate(d).line())}")
    if d.matches:
        m = d.matches[0]
        more = f" (+{len(d.matches) - 1} more below)" if len(d.matches) > 1 else ""
        con.print(f"[bold]Match:[/bold] {_t(m.title)} (pattern {_t(m.pattern_id)}){more}")
    else:
        con.print("[bold]Match:[/bold] no known fault pattern; the engine's findings follow")
    con.print(f"{st.files} files, {st.lines:,} lines, {st.bytes / 1e6:.1f} MB, {st.templates} templates, "
              f"{st.seconds:.1f} s")
    if d.report:  # what the failure report said
        con.print(f"Failure report: {_t(d.report.get('url', ''))}")
        if d.report.get("description"):
            con.print(f"  {_t(d.report['description'], 500)}")
    for m in d.matches:
        con.print(f"\n[bold red]Known fault:[/bold red] {_t(m.title)} [{_t(m.category)}] "
                  f"(pattern {_t(m.pattern_id)})")
        if m.remediation:
            con.print(f"  Remediation: {_t(m.remediation)}")
        for line in m.evidence[:3]:
            con.print(f"  > {_t(line, 300)}")
        if len(m.evidence) > 3:
            con.print(f"  > +{len(m.evidence) - 3} more lines")
    basis = stage_basis_phrase(d)
    con.print(f"\n[bold]Stage:[/bold] {d.stage}" + (f" ({escape(basis)})" if basis else ""))
    if d.hang:  # flight-recorder and stack dumps
        con.print(f"[bold]Hang:[/bold] {_t(d.hang.summary, 500)}")
    if d.events:
        con.print("\n[bold]Failure-indicating events[/bold] (most indicative first)")
        for k, e in enumerate(d.events, start=1):
            con.print(f"{k:2d}. [{e.score:.2f}] {_t(e.template, 300)}")
            con.print(f"     {e.count}× {e.level or '-'} on {escape(listed(by_suspicion(d, e.nodes), 4))}"
                      + (f", first {_t(e.first_seen)}" if e.first_seen else ""))
            if e.examples:
                con.print(f"     e.g. {_t(e.examples[0], 300)}")
    else:
        con.print("\nNo failure-indicating events found.")
    _nodes(con, d)
    if d.iterations:
        it = d.iterations[0]
        con.print(f"\n[bold]Anomalous iteration:[/bold] {it.iteration} (score {it.score:.2f}) on "
                  f"{escape(listed(by_suspicion(d, it.nodes), 5))}")
        for t in it.events[:3]:
            con.print(f"  + {_t(t, 200)}")
        if len(it.events) > 3:
            con.print(f"  + {len(it.events) - 3} more new events")
        if len(d.iterations) > 1:
            rest = ", ".join(str(i.iteration) for i in d.iterations[1:6])
            con.print(f"  ({len(d.iterations) - 1} more anomalous iteration(s): {rest}"
                      + (" …" if len(d.iterations) > 6 else "") + ")")
    _files(con, "file(s) could not be read to the end", st.unreadable_files)
    _files(con, "file(s) hold no log text (empty or binary)", st.empty_or_binary_files)
    if st.long_lines_cut:
        con.print(f"{st.long_lines_cut} over-long line(s) were cut at 64 KiB.")
    return buf.getvalue()


def _nodes(con: Console, d: Diagnosis) -> None:
    notable = [n for n in d.nodes if n.score >= NOTABLE_NODE_SCORE]
    if notable:
        table = Table(title="Suspicious nodes", show_edge=False)
        table.add_column("node")
        table.add_column("score", justify="right")
        table.add_column("why")
        for n in notable:
            why = "; ".join(shown(t) for t in n.events[:2])
            why = cut(why, 200) + (f" (+{len(n.events) - 2} more)" if len(n.events) > 2 else "")
            table.add_row(_t(n.node), f"{n.score:.2f}", escape(why))
        con.print()
        con.print(table)
    elif d.nodes:
        con.print("\nSuspicious nodes: none stands out (every node scores below "
                  f"{NOTABLE_NODE_SCORE:.2f}).")


def _files(con: Console, what: str, files: list[str], limit: int = 10) -> None:
    if not files:
        return
    con.print(f"\n[yellow]{len(files)} {what}:[/yellow]")
    for f in files[:limit]:
        con.print(f"  {_t(f)}")
    if len(files) > limit:
        con.print(f"  +{len(files) - limit} more")
