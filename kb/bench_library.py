"""``python -m kb.bench_library``: how well the built-in library names real failure lines it was
not written from.

The lines live in ``kb/bench/data/field_lines.jsonl`` (one JSON object a line: ``id``, ``split``,
``category``, ``line``, ``source``, ``note``). Each line belongs to the ``dev`` or the ``test`` half
by a hash of its text (:func:`split_of`), fixed before any pattern was written from the dev half;
loading checks that every stored ``split`` still agrees with the hash.

A line is *matched* when any pattern fires on it alone, and *exact* when the first pattern of the
matcher's ranking has the line's category. Reported per split and per category.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.model import CATEGORIES
from kb import KbError

DEFAULT_FILE = Path(__file__).resolve().parent / "bench" / "data" / "field_lines.jsonl"
SPLITS = ("dev", "test")
_FIELDS = ("id", "split", "category", "line", "source")


def split_of(line: str) -> str:
    """The half a line belongs to: parity of sha256 of its whitespace-normalised text."""
    key = re.sub(r"\s+", " ", line.strip())
    return "test" if int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % 2 else "dev"


def load_field_lines(path: Path = DEFAULT_FILE) -> list[dict[str, Any]]:
    """Read and check the labelled lines; KbError names the first bad row."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise KbError(f"cannot read {path}: {exc.strerror or exc}") from None
    rows: list[dict[str, Any]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise KbError(f"{path}:{n}: not JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise KbError(f"{path}:{n}: not a JSON object")
        missing = [k for k in _FIELDS if not isinstance(row.get(k), str) or not row[k]]
        if missing:
            raise KbError(f"{path}:{n}: missing {', '.join(missing)}")
        if row["category"] not in CATEGORIES:
            raise KbError(f"{path}:{n}: unknown category {row['category']!r}")
        if row["split"] != split_of(row["line"]):
            raise KbError(f"{path}:{n}: split {row['split']!r} disagrees with the hash rule")
        rows.append(row)
    return rows


@dataclass
class Tally:
    n: int = 0
    matched: int = 0
    exact: int = 0

    def add(self, matched: bool, exact: bool) -> None:
        self.n += 1
        self.matched += matched
        self.exact += exact

    def rates(self) -> tuple[float, float]:
        return (self.matched / self.n, self.exact / self.n) if self.n else (0.0, 0.0)


@dataclass
class Report:
    splits: dict[str, Tally] = field(default_factory=dict)
    categories: dict[tuple[str, str], Tally] = field(default_factory=dict)
    misses: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        def t(x: Tally) -> dict[str, Any]:
            m, e = x.rates()
            return {"n": x.n, "matched": x.matched, "exact": x.exact,
                    "matched_rate": round(m, 3), "exact_rate": round(e, 3)}
        return {"splits": {k: t(v) for k, v in self.splits.items()},
                "categories": {f"{s}:{c}": t(v) for (s, c), v in sorted(self.categories.items())},
                "misses": self.misses}


def evaluate(rows: Iterable[dict[str, Any]], matcher: Any, splits: Iterable[str] = SPLITS) -> Report:
    """Match each row's line alone and tally matched / exact-category per split and category."""
    wanted = set(splits)
    rep = Report()
    for row in rows:
        if row["split"] not in wanted:
            continue
        found = matcher.match_lines([row["line"]])
        matched = bool(found)
        exact = matched and found[0].category == row["category"]
        rep.splits.setdefault(row["split"], Tally()).add(matched, exact)
        rep.categories.setdefault((row["split"], row["category"]), Tally()).add(matched, exact)
        if not exact:
            rep.misses.append({"id": row["id"], "split": row["split"], "want": row["category"],
                               "got": [(m.pattern_id, m.category) for m in found[:3]],
                               "line": row["line"][:160]})
    return rep


def _print(rep: Report, show_misses: bool) -> None:
    print(f"{'split':<6} {'lines':>5} {'matched':>8} {'exact':>8}")
    for s in SPLITS:
        if s in rep.splits:
            t = rep.splits[s]
            m, e = t.rates()
            print(f"{s:<6} {t.n:>5} {m:>8.1%} {e:>8.1%}")
    print()
    print(f"{'split':<6} {'category':<30} {'lines':>5} {'matched':>8} {'exact':>8}")
    for (s, c), t in sorted(rep.categories.items()):
        m, e = t.rates()
        print(f"{s:<6} {c:<30} {t.n:>5} {m:>8.1%} {e:>8.1%}")
    if show_misses:
        print()
        for miss in rep.misses:
            print(f"{miss['split']:<5} {miss['id']} want {miss['want']}, got {miss['got']}: {miss['line']}")


def guarded(fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or None after one ``error:`` line on stderr when it raises KbError (bad input)."""
    try:
        return fn(*args)
    except KbError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    from kb import library
    from kb.matcher import Matcher

    ap = argparse.ArgumentParser(prog="python -m kb.bench_library", description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", type=Path, default=DEFAULT_FILE, help="labelled lines (JSONL)")
    ap.add_argument("--split", choices=(*SPLITS, "all"), default="all")
    ap.add_argument("--misses", action="store_true", help="list the lines not named exactly")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    rows = guarded(load_field_lines, args.file)
    if rows is None:
        return 2
    splits = SPLITS if args.split == "all" else (args.split,)
    rep = evaluate(rows, Matcher(library.builtin_patterns()), splits)
    if args.json:
        print(json.dumps(rep.as_dict(), indent=2))
    else:
        _print(rep, args.misses)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
