"""Which entry of the severity lexicon holds across waves (`l4 bench root-model ablate`).

Each entry of `engine/data/severity.yaml` (a term, a damp rule, a cascade phrase, a role phrase) is
switched off in turn — its regex replaced by one that matches nothing — and every usable development
case (`engine.bench.root_learn.usable_cases`; the held-out halves are skipped, and any case whose
truth says `split: test`) is run as `analyze` runs it, with the fault signatures given. For each entry
the cases whose root rank moved are counted per group (a public or real-run wave, each generator): an
entry that helps only the wave it was written on, or that costs more than it gains, shows here.
"""

from __future__ import annotations

import copy
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.bench.evaluate import ROOT_TOP

NEVER = r"(?!x)x"
# role entries that are lists of regexes (the others are words, a number or one pattern)
ROLE_LISTS = ("report", "consequence", "wrapper", "disconnect", "introduces", "continued",
              "return_frame", "stack_header", "traceback_intro")

Path_ = tuple[str, ...]  # where an entry is: ("terms", "3") or ("roles", "report", "0")


def entries(data: dict) -> list[tuple[str, Path_]]:
    """(name, path) of every entry that can be switched off, in the file's order."""
    out: list[tuple[str, Path_]] = []
    for key in ("terms", "damp", "cascade"):
        out += [(f"{key}[{i}]", (key, str(i))) for i in range(len(data.get(key, [])))]
    roles = data.get("roles", {})
    for key in ROLE_LISTS:
        out += [(f"roles.{key}[{i}]", ("roles", key, str(i))) for i in range(len(roles.get(key, [])))]
    return out


def switched_off(data: dict, path: Path_) -> dict:
    """A copy of the lexicon with the entry at `path` matching nothing."""
    out = copy.deepcopy(data)
    lst = out["roles"][path[1]] if path[0] == "roles" else out[path[0]]
    i = int(path[-1])
    if isinstance(lst[i], dict):
        lst[i]["regex"] = NEVER
    else:
        lst[i] = NEVER
    return out


@dataclass
class Moved:
    name: str
    # case: (group, root rank before, root rank with the entry off)
    cases: dict[str, tuple[str, int | None, int | None]] = field(default_factory=dict)

    def per_group(self) -> dict[str, tuple[int, int]]:
        """Group: (root first, root among the first 3) gained by switching the entry off (negative: lost)."""
        out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for group, before, after in self.cases.values():
            out[group][0] += _first(after) - _first(before)
            out[group][1] += _top(after) - _top(before)
        return {g: (a, b) for g, (a, b) in sorted(out.items())}


def _first(rank: int | None) -> int:
    return int(rank == 1)


def _top(rank: int | None) -> int:
    return int(rank is not None and rank <= ROOT_TOP)


def group_of(truth: dict) -> str:
    from engine.bench.root_learn import corpus_of

    corpus = corpus_of(truth)
    return f"{corpus} wave {truth.get('wave', 1)}" if corpus in ("public", "realrun") else corpus


def root_rank(case: Path, truth: dict, known: Sequence = ()) -> int | None:
    """The 1-based place of the first reported event that shows a root line (None: none does)."""
    from engine.bench.evaluate import diagnose_case
    from engine.bench.root_learn import root_lines
    from engine.bench.rootcause import shows_root

    _, diagnosis = diagnose_case(case, known)
    roots = root_lines(truth)
    return next((n for n, e in enumerate(diagnosis.events, start=1)
                 if shows_root(e.template, e.examples, roots)), None)


def _clear_caches() -> None:
    import engine.rules as rules

    for name, module in list(sys.modules.items()):
        if not name.startswith("engine") or module is None:
            continue
        for value in list(vars(module).values()):
            if callable(value) and hasattr(value, "cache_clear") and value is not rules.load:
                value.cache_clear()


def ablate(roots: Iterable[Path], known: Sequence = (), only: Sequence[str] = (),
           on_entry: Callable[[Moved], None] | None = None) -> list[Moved]:
    """Switch each lexicon entry (or those named in `only`) off in turn; the cases whose root moved."""
    import engine.rules as rules
    from engine.bench.root_learn import settings, usable_cases

    cases = [(c, t) for c, t in usable_cases(roots, settings()["held_out"]) if t.get("split") != "test"]
    lexicon = rules.load("severity")  # the cached dict every reader of the lexicon gets
    shipped = copy.deepcopy(lexicon)

    def ranks() -> dict[str, tuple[str, int | None]]:
        _clear_caches()
        return {c.name: (group_of(t), root_rank(c, t, known)) for c, t in cases}

    out: list[Moved] = []
    try:
        base = ranks()
        for name, path in entries(shipped):
            if only and name not in only:
                continue
            lexicon.clear()
            lexicon.update(switched_off(shipped, path))
            moved = Moved(name, {k: (g, base[k][1], r) for k, (g, r) in ranks().items() if r != base[k][1]})
            out.append(moved)
            if on_entry:
                on_entry(moved)
    finally:
        lexicon.clear()
        lexicon.update(shipped)
        _clear_caches()
    return out


def format_ablation(moved: Sequence[Moved]) -> str:
    """One row per entry: what switching it off gains (+) or loses (-) per group, root first / top 3."""
    lines = ["| entry switched off | cases moved | root first / top 3 gained per group |", "|---|---|---|"]
    for m in moved:
        cells = ", ".join(f"{g} {a:+d}/{b:+d}" for g, (a, b) in m.per_group().items()) or "–"
        lines.append(f"| {m.name} | {len(m.cases)} | {cells} |")
    return "\n".join(lines)
