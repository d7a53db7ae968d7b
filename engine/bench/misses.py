"""The cases L4 got wrong, one line each (`l4 bench eval --show-misses`): what to open next.

A stage miss names the stage given and the labeled one (`unknown` is an abstention); a root miss
(real cases with `root_lines`) names the rank of the first event that shows a root line, `-` when
no event does.
"""
from __future__ import annotations

from engine.bench.evaluate import EvalResult


def misses(res: EvalResult) -> list[dict]:
    """The cases of `res` whose stage is wrong or whose root cause is not the first event."""
    return [c for c in res.cases if c["stage"] != c["truth_stage"] or c.get("root_rank", 1) != 1]


def format_misses(res: EvalResult) -> str:
    rows = misses(res)
    out = [f"#### L4's misses ({res.split}): {len(rows)} of {len(res.cases)} cases", ""]
    if not rows:
        return "\n".join(out + ["none"])
    out += ["| case | kind | source | stage given | stage labeled | root rank |", "|" + "---|" * 6]
    for c in rows:
        stage = c["stage"] if c["stage"] == c["truth_stage"] else f"**{c['stage']}**"
        rank = c.get("root_rank", 1)
        out.append(f"| {c['case']} | {c['kind']} | {c.get('source') or '–'} | {stage} | {c['truth_stage']} "
                   f"| {'–' if 'root_rank' not in c else (rank if rank is not None else '-')} |")
    return "\n".join(out)
