"""How a corpus's jobs are read: template sharing with the history and clock notes, per corpus.

`python -m engine.bench.layout_report <corpus> [<corpus> …] [--split dev]` parses each case's failed
job with its history jobs (one template vocabulary, as `l4 bench eval` does) and reports, per corpus:
- shared lines / shared templates: the failed job's lines (templates) whose template a history job
  also has; the cross-job filter can only call routine what the history shares, so a line decoration
  read in one layout but not the other shows as a fall here;
- the clock notes of the failed job (`engine.clock`: `zone`, `skew`, `backwards`) and the cases
  whose notes make the timeline untrusted, with the cases named (`--names`).
Cases without history count for the notes only. Development corpora only (no truth is read but
the split).
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.bench.evaluate import case_dirs, history_dirs
from engine.clock import clock_notes, settle_years, settle_zones, timeline_trusted
from engine.parse import parse_jobs


@dataclass
class CorpusFigures:
    cases: int = 0
    with_history: int = 0
    lines: int = 0
    shared_lines: int = 0
    templates: int = 0
    shared_templates: int = 0
    notes: Counter = field(default_factory=Counter)  # kind -> notes
    untrusted: list[str] = field(default_factory=list)  # cases whose notes distrust the timeline


def case_figures(case: Path, into: CorpusFigures) -> None:
    """Add the figures of one case folder (`failed/`, `history/…`) to `into`."""
    history = history_dirs(case)
    parsed = parse_jobs([case / "failed", *history])
    failed = parsed[0]
    into.cases += 1
    if history:
        seen = {t.template for h in parsed[1:] for t in h.templates}
        into.with_history += 1
        into.lines += sum(t.count for t in failed.templates)
        into.shared_lines += sum(t.count for t in failed.templates if t.template in seen)
        into.templates += len(failed.templates)
        into.shared_templates += sum(t.template in seen for t in failed.templates)
    settle_years(failed)
    notes = settle_zones(failed) + clock_notes(failed)
    into.notes.update(n.kind for n in notes)
    if not timeline_trusted(notes):
        into.untrusted.append(case.name)


def corpus_figures(root: Path, split: str = "all") -> CorpusFigures:
    fig = CorpusFigures()
    for case in case_dirs(root, split):
        case_figures(case, fig)
    return fig


def _share(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "–"


def format_table(rows: dict[str, CorpusFigures], names: bool = False) -> str:
    out = ["| corpus | cases | with history | shared lines | shared templates | zone | skew | backwards "
           "| untrusted timeline |", "|---|---|---|---|---|---|---|---|---|"]
    for label, f in rows.items():
        out.append(f"| {label} | {f.cases} | {f.with_history} | {_share(f.shared_lines, f.lines)} | "
                   f"{_share(f.shared_templates, f.templates)} | {f.notes['zone']} | {f.notes['skew']} | "
                   f"{f.notes['backwards']} | {len(f.untrusted)} |")
    if names:
        out += [f"- {label}: {', '.join(f.untrusted)}" for label, f in rows.items() if f.untrusted]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpora", nargs="+", type=Path)
    ap.add_argument("--split", default="all", choices=("all", "dev", "test"))
    ap.add_argument("--names", action="store_true", help="name the cases with an untrusted timeline")
    args = ap.parse_args(argv)
    rows = {str(root): corpus_figures(root, args.split) for root in args.corpora}
    print(format_table(rows, args.names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
