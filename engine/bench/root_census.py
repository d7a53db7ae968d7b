"""Why the root cause is not first: a census of the misses (`l4 bench root-model census`).

For every usable development case (`engine.bench.root_learn.usable_cases`: the held-out halves of
data/root_learn.yaml are skipped) the engine is run as `engine.diagnose.analyze` runs it, and a case
whose root line is not the first reported event gets one reason, the first that applies:
- `no template`: no template of the failed job shows a root line (the root line was parsed into a
  template that does not fit it, or is absent: a decoration, a cut, a merge by Drain);
- `not a candidate`: a template shows it, but a history job has it too (the cross-job filter);
- `role <r>`: its best candidate has a role (context, wrapper, consequence, cascade, report) and is
  damped as an echo;
- `below floor`: it has no role but scores below `select_events`' floor (MIN_SCORE, or half the best);
  `low severity` when its severity is below ROOT_SEVERITY (the lexicon found no alarming word);
- `outranked`: it is reported, behind another event (the first one's role is named).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.bench.evaluate import ROOT_TOP


@dataclass
class Miss:
    case: str
    corpus: str
    rank: int | None  # 1-based place among the reported events (None: not reported)
    reason: str
    root_line: str
    root_template: str = ""
    score: float = 0.0
    severity: float = 0.0
    lexicon: float = 0.0  # the lexicon's severity before roles and stacks raised or capped it
    level: str = ""
    specificity: float = 0.0
    role: str = ""
    scored_rank: int | None = None  # 1-based place in the whole scored list
    first_template: str = ""
    first_role: str = ""
    first_severity: float = 0.0
    first_score: float = 0.0


@dataclass
class CaseResult:
    case: str
    corpus: str
    rank: int | None
    miss: Miss | None


def census_case(case: Path, truth: dict) -> CaseResult:
    from engine.bench.evaluate import parse_case
    from engine.bench.root_learn import corpus_of, root_lines
    from engine.bench.rootcause import shows_root
    from engine.diagnose import score_job
    from engine.events import MIN_SCORE, RELATIVE, ROOT_SEVERITY, select_events
    from engine.severity import severity as lexicon_severity

    parsed = parse_case(case)
    job = parsed[0]
    _, _, candidates, scored = score_job(job, parsed[1:])
    selected = select_events(scored)
    roots = root_lines(truth)
    corpus = corpus_of(truth)

    def examples(e) -> list[str]:
        return list(dict.fromkeys([*e.evidence, *job.templates[e.id].examples]))[:3]

    rank = next((n for n, e in enumerate(selected, start=1)
                 if shows_root(job.templates[e.id].template, examples(e), roots)), None)
    if rank == 1:
        return CaseResult(case.name, corpus, rank, None)
    miss = Miss(case=case.name, corpus=corpus, rank=rank, reason="", root_line=roots[0][:200])
    if selected:
        top = selected[0]
        miss.first_template = job.templates[top.id].template[:160]
        miss.first_role, miss.first_severity, miss.first_score = top.role or "", top.severity, top.score
    ids = [i for i, t in enumerate(job.templates) if shows_root(t.template, t.examples, roots)]
    cand = set(candidates)
    place = {e.id: n for n, e in enumerate(scored, start=1)}
    if not ids:
        miss.reason = "no template"
        miss.root_line = next((r for r in roots if r.strip()), roots[0])[:200]
    elif not cand.intersection(ids):
        miss.reason = "not a candidate"
        miss.root_template = job.templates[ids[0]].template[:160]
    else:
        best = min((i for i in ids if i in cand), key=lambda i: place[i])
        e = scored[place[best] - 1]
        t = job.templates[best]
        miss.root_template = t.template[:160]
        miss.score, miss.severity, miss.role = e.score, e.severity, e.role or ""
        miss.scored_rank = place[best]
        miss.lexicon, miss.level = lexicon_severity(t.template, t.level), t.level or ""
        n_nodes = max(1, len(job.node_counts))
        miss.specificity = 1.0 if n_nodes == 1 else 1.0 - (max(1, len(t.nodes)) - 1) / (n_nodes - 1)
        floor = max(MIN_SCORE, RELATIVE * scored[0].score) if scored else MIN_SCORE
        if rank is not None:
            miss.reason = f"outranked by {selected[0].role or 'a root'}"
        elif e.role:
            miss.reason = f"role {e.role}"
        elif e.score < floor:
            miss.reason = "below floor, low severity" if e.severity < ROOT_SEVERITY else "below floor"
        else:
            miss.reason = "not kept (echo or event cap)"
    return CaseResult(case.name, corpus, rank, miss)


def census(roots: Iterable[Path], on_case: Callable[[str], None] | None = None) -> list[CaseResult]:
    from engine.bench.root_learn import settings, usable_cases
    from engine.bench.stage_learn import extract_each

    return extract_each(usable_cases(roots, settings()["held_out"]), census_case, on_case)


def save(results: Sequence[CaseResult], path: Path) -> None:
    path.write_text(json.dumps([{"case": r.case, "corpus": r.corpus, "rank": r.rank,
                                 "miss": asdict(r.miss) if r.miss else None} for r in results], indent=1)
                    + "\n")


def format_census(results: Sequence[CaseResult], *, details: bool = True) -> str:
    """Counts of the misses by reason per corpus (not first / not among the first 3), then each miss."""
    corpora = sorted({r.corpus for r in results})
    total = Counter(r.corpus for r in results)
    first = Counter(r.corpus for r in results if r.rank == 1)
    top = Counter(r.corpus for r in results if r.rank is not None and r.rank <= ROOT_TOP)
    reasons: dict[str, Counter] = defaultdict(Counter)
    reasons_top: dict[str, Counter] = defaultdict(Counter)
    for r in results:
        if r.miss:
            reasons[r.miss.reason][r.corpus] += 1
            if r.rank is None or r.rank > ROOT_TOP:
                reasons_top[r.miss.reason][r.corpus] += 1
    head = "| | " + " | ".join(corpora) + " |"
    out = ["#### Root cause misses by reason (not first / not among the first 3)", "", head,
           "|" + "---|" * (len(corpora) + 1),
           "| cases | " + " | ".join(str(total[c]) for c in corpora) + " |",
           "| root first | " + " | ".join(f"{first[c]} ({first[c] / total[c]:.2f})" for c in corpora) + " |",
           f"| root among first {ROOT_TOP} | "
           + " | ".join(f"{top[c]} ({top[c] / total[c]:.2f})" for c in corpora) + " |"]
    for reason in sorted(reasons, key=lambda k: -sum(reasons[k].values())):
        out.append(f"| {reason} | " + " | ".join(f"{reasons[reason][c]} / {reasons_top[reason][c]}"
                                                  for c in corpora) + " |")
    if details:
        out += ["", "| case | corpus | rank | reason | root template | sev (lexicon) | score | role | "
                "first event (role, sev, score) |", "|" + "---|" * 9]
        for r in results:
            m = r.miss
            if m is None:
                continue
            tmpl = (m.root_template or m.root_line).replace("|", "\\|")[:90]
            first_ev = m.first_template.replace("|", "\\|")[:70]
            out.append(f"| {m.case} | {m.corpus} | {m.rank or '-'} | {m.reason} | `{tmpl}` | "
                       f"{m.severity:.2f} ({m.lexicon:.2f}{', ' + m.level if m.level else ''}) | "
                       f"{m.score:.2f} | "
                       f"{m.role or '-'} | `{first_ev}` ({m.first_role or '-'}, {m.first_severity:.2f}, "
                       f"{m.first_score:.2f}) |")
    return "\n".join(out)
