"""A file's line decoration: what (nearly) every line of a file carries that is no part of its message.

A log pasted into an issue thread is often a markdown quote (`> 2023-03-22 09:32:52 iter 3010: …`),
copied from an editor with its line-number gutter (`  12 | …`), from a table (`| … |`), or collected
with a tag every line of the file repeats (`[trainer0|0]:…`, `web_1  | …`); a terminal capture
keeps its colour codes. The header rules (`engine.headers`) would read such a line's decoration as
its message, so its timestamp, level and launcher prefix go unseen and its template keeps the
decoration. The decoration is learned per file from the lines of its start (`learn`), by the shapes
of `decorations` in `engine/data/headers.yaml`: a shape is the file's decoration when at least a
share of its non-blank lines match it. It is stripped before the header rules; the lines keep their
raw text for display. A shape may also sit right after a launcher's prefix (torchrun's
`[default1]:[titan] …` in a console that interleaves ranks): it is read and stripped there too.

The decision is the job's (`learn_job`), over the files the cross-job filter compares (the failed
job and its history): a file that carries a decoration another file of the job was learned with, on
fewer of its lines (a console where the launcher's lines interleave the ranks' tagged ones; the
same rank's own file carries the tag on every line), is stripped of it too, so one line gives one
template in both layouts. A file whose lines do not carry it (a plain paste beside a quoted one)
is left alone, and colour codes seen in one file are removed in all.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from engine.rules import compiled, load

MAX_LEARNED = 16  # the job's most common decorations a file without its own is tried against


@dataclass(frozen=True)
class Decoration:
    """How a file's lines are decorated: regexes (sources) removed from every line that has them."""

    anywhere: str | None = None  # removed wherever it matches (colour codes)
    prefix: str | None = None  # removed at the line's start, or right after a launcher's prefix (`after`)
    suffix: str | None = None  # removed at the line's end
    name: str = ""  # the shape(s) it was learned from
    after: str | None = None  # the launcher prefixes a decoration may follow (`[default1]:`)

    def strip(self, line: str) -> str:
        """`line` without its decoration (unchanged where it has none)."""
        if self.anywhere is not None:
            line = compiled(self.anywhere).sub("", line)
        if self.prefix is not None:
            a, b = _prefix_span(line, self.prefix, self.after)
            if b > a:
                line = line[:a] + line[b:]
        if self.suffix is not None:
            m = compiled(self.suffix).search(line)
            if m is not None:
                line = line[:m.start()]
        return line


def _prefix_span(line: str, prefix: str, after: str | None) -> tuple[int, int]:
    """Where `prefix` decorates `line`: at its start, else right after the launcher prefixes `after`
    that start it ((0, 0): nowhere)."""
    m = compiled(prefix).match(line)
    if m is not None and m.end():
        return 0, m.end()
    if after is not None:
        lead = compiled(after).match(line)
        if lead is not None and lead.end():
            m = compiled(prefix).match(line, lead.end())
            if m is not None and m.end() > lead.end():
                return lead.end(), m.end()
    return 0, 0


@dataclass(frozen=True)
class _Shape:
    name: str
    rx: re.Pattern[str]
    increasing: bool = False
    constant: bool = False
    suffix: str | None = None


@dataclass(frozen=True)
class _Data:
    size: int
    share: float
    job_share: float
    min_lines: int
    anywhere: list[tuple[str, str]]
    shapes: list[_Shape]
    after: str | None


@lru_cache(maxsize=1)
def _data() -> _Data:
    data = load("headers")
    d = data["decorations"]
    anywhere = [(a["name"], a["regex"]) for a in d.get("anywhere", [])]
    shapes = [_Shape(p["name"], re.compile(p["regex"]), bool(p.get("increasing")), bool(p.get("constant")),
                     p.get("suffix")) for p in d.get("prefixes", [])]
    names = set(d.get("after", []))
    lead = [re.sub(r"\(\?P<\w+>", "(?:", p["regex"]) for p in data["prefixes"] if p["name"] in names]
    after = f"(?:{'|'.join(lead)})+" if lead else None
    return _Data(int(d["sample"]), float(d["share"]), float(d.get("job_share", d["share"])),
                 int(d["min_lines"]), anywhere, shapes, after)


def sample_size() -> int:
    """How many lines of a file's start `learn` reads."""
    return _data().size


def _sample(lines: Sequence[str]) -> tuple[list[str], tuple[str, str] | None]:
    """The non-blank lines of a file's start, colour codes removed, and the colour shape they had."""
    d = _data()
    sample = [ln for ln in lines[:d.size] if ln.strip()]
    colour = next(((n, rx) for n, rx in d.anywhere if any(compiled(rx).search(ln) for ln in sample)), None)
    if colour is not None:
        sample = [compiled(colour[1]).sub("", ln) for ln in sample]
    return sample, colour


def _shape_match(shape: _Shape, line: str, after: str | None) -> re.Match[str] | None:
    """The shape's match right after the launcher prefixes that start the line, else at its start."""
    lead = compiled(after).match(line) if after is not None else None
    if lead is not None and lead.end():
        m = shape.rx.match(line, lead.end())
        if m is not None and m.end() > lead.end():
            return m
    m = shape.rx.match(line)
    return m if m is not None and m.end() else None


def _fit(shape: _Shape, sample: list[str], need: float, after: str | None) -> str | None:
    """The prefix (regex source) `shape` decorates `sample` with, at least `need` of its lines, else None."""
    from engine.headers import reads_prefix  # the header rules read what is theirs

    found: list[re.Match[str]] = []
    spare = len(sample) - need  # lines that may lack the shape: past that, it cannot fit (plain logs
    missed = 0  # fail every shape on their first lines, so most files stop after a few)
    for ln in sample:
        m = _shape_match(shape, ln, after)
        if m is not None:
            found.append(m)
        else:
            missed += 1
            if missed > spare:
                return None
    if len(found) < need:
        return None
    if shape.increasing:
        nums = [int(m.group("n")) for m in found]
        if sum(b > a for a, b in zip(nums, nums[1:], strict=False)) < _data().share * (len(nums) - 1):
            return None
    if shape.constant:
        tag, n = Counter(m.group(0).strip() for m in found).most_common(1)[0]
        if n < need or sum(reads_prefix(m.string[m.start():]) for m in found) >= need:
            return None
        return re.escape(tag) + r"[ \t]?"
    return shape.rx.pattern


def learn(lines: Sequence[str]) -> Decoration | None:
    """The decoration of the file that starts with `lines` (None: its lines carry none)."""
    d = _data()
    sample, colour = _sample(lines)
    if len(sample) < d.min_lines:
        return None
    for shape in d.shapes:
        prefix = _fit(shape, sample, d.share * len(sample), d.after)
        if prefix is not None:
            return Decoration(anywhere=colour[1] if colour else None, prefix=prefix, suffix=shape.suffix,
                              name="+".join([*([colour[0]] if colour else []), shape.name]), after=d.after)
    return Decoration(anywhere=colour[1], name=colour[0]) if colour else None


def _carried(deco: Decoration, sample: list[str]) -> int:
    """How many lines of `sample` carry the prefix (and suffix) of `deco`."""
    sfx = compiled(deco.suffix) if deco.suffix is not None else None
    if deco.prefix is None:
        return 0
    return sum(_prefix_span(ln, deco.prefix, deco.after)[1] > 0 and (sfx is None or bool(sfx.search(ln)))
               for ln in sample)


@dataclass(frozen=True)
class JobEvidence:
    """What the files of a job show together (`job_evidence`): the decorations files were learned with
    (most common first, with how many files) and the one kind of colour codes they show, if one."""

    learned: tuple[tuple[Decoration, int], ...] = ()
    colour: tuple[str, str] | None = None


def job_evidence(own: Sequence[Decoration | None]) -> JobEvidence:
    """The job's evidence from what each of its files shows on its own (`learn` of each file's start)."""
    learned = Counter(replace(o, anywhere=None, name=o.name.split("+")[-1]) for o in own
                      if o is not None and o.prefix is not None).most_common(MAX_LEARNED)
    colours = {c for c in (_colour(o) for o in own) if c is not None}
    return JobEvidence(tuple(learned), next(iter(colours)) if len(colours) == 1 else None)


def needs_head(mine: Decoration | None, job: JobEvidence) -> bool:
    """Whether `decide` reads the file's first lines (it has no prefix of its own, others have one)."""
    return bool(job.learned) and (mine is None or mine.prefix is None)


def decide(mine: Decoration | None, head: Sequence[str], job: JobEvidence) -> Decoration | None:
    """The decoration of a file that shows `mine` on its own (`learn`), in a job that shows `job`.
    `head`: the file's first lines, read only when `needs_head` (an empty list will do otherwise)."""
    d = _data()
    colour = _colour(mine) or job.colour
    found = None
    if needs_head(mine, job):
        learned = dict(job.learned)
        sample, _ = _sample(head)
        best = max(learned, key=lambda o: (_carried(o, sample), learned[o]))
        need = max(1.0, d.job_share * len(sample))
        if sample and _carried(best, sample) >= need and _counts_up(best, sample):
            found = best
    if found is None and (mine is None or mine.prefix is None):
        return Decoration(anywhere=colour[1], name=colour[0]) if colour else None
    deco = found if found is not None else replace(mine, anywhere=None, name=mine.name.split("+")[-1])
    return replace(deco, anywhere=colour[1] if colour else None,
                   name="+".join([*([colour[0]] if colour else []), deco.name]))


def learn_job(heads: Sequence[Sequence[str]]) -> list[Decoration | None]:
    """The decorations of a job's files (the failed job's and its history's: the files whose templates
    the cross-job filter compares), from the first lines of each (`heads`), in their order.

    Each file keeps what it shows on its own (`learn`). A file with no decoration of its own takes the
    one another file was learned with when at least `job_share` of its own lines carry it (the shape's
    number still counting up, for a gutter): a console whose launcher lines interleave the tagged lines
    of the rank files; a file whose lines do not carry it keeps its lines as they are. Colour codes one
    file shows are removed in every file. The same as `decide` over `job_evidence` of each file's
    `learn`, which `engine.parse` runs with the first step on the executor's workers."""
    own = [learn(h) for h in heads]
    job = job_evidence(own)
    return [decide(mine, head, job) for head, mine in zip(heads, own, strict=True)]


def _colour(deco: Decoration | None) -> tuple[str, str] | None:
    """(name, regex) of the colour codes `deco` removes, if any."""
    if deco is None or deco.anywhere is None:
        return None
    named = ((n, rx) for n, rx in _data().anywhere if rx == deco.anywhere)
    return next(named, (deco.name.split("+")[0], deco.anywhere))


def _counts_up(deco: Decoration, sample: list[str]) -> bool:
    """Whether the lines of `sample` a gutter-shaped `deco` decorates number up (any other shape: True)."""
    shape = next((s for s in _data().shapes if s.name == deco.name and s.rx.pattern == deco.prefix), None)
    if shape is None or not shape.increasing:
        return True
    found = (_shape_match(shape, ln, deco.after) for ln in sample)
    nums = [int(m.group("n")) for m in found if m is not None]
    return sum(b > a for a, b in zip(nums, nums[1:], strict=False)) >= _data().share * (len(nums) - 1)


def strip(line: str, decoration: Decoration | None) -> str:
    """`line` without `decoration` (the line itself when there is none)."""
    return line if decoration is None else decoration.strip(line)
