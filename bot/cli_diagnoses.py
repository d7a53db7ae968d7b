"""`l4 diagnoses list|show`: the stored diagnoses and their IDs (what `l4 patterns confirm` takes)."""
from __future__ import annotations

import argparse
import json
import sys

from bot.cli_kb import _guard, _open
from bot.where import shown, stage_basis_phrase


def _list(args: argparse.Namespace) -> int:
    from kb import KbError
    from kb.diagnoses import recent, summary

    if args.limit < 1:
        raise KbError("--limit must be at least 1")
    with _open() as s:
        rows = [summary(s, rec) for rec in recent(s, job=args.job, limit=args.limit)]
    if args.format == "json":
        sys.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
        return 0
    if rows:
        print(f"{'ID':>6}  {'TIME (UTC)':<19}  {'JOB':<24} {'STATUS':<9} {'MATCHED PATTERN':<34} "
              "CONFIRMED BY")
    for r in rows:
        print(f"{r['diagnosis_id']:>6}  {r['time']:<19}  {shown(r['job_id']):<24} {r['status']:<9} "
              f"{shown(r['matched_pattern'] or '-'):<34} {', '.join(map(shown, r['confirmed_by'])) or '-'}")
    what = f" of job {args.job}" if args.job else ""
    print(f"{len(rows)} diagnosis(es){what}" + (f", newest first (at most {args.limit})" if rows else ""),
          file=sys.stderr)
    return 0


def _show(args: argparse.Namespace) -> int:
    from engine.model import diagnosis_from_dict
    from kb.diagnoses import as_dict, get, summary

    with _open() as s:
        rec = get(s, args.id)
        info = summary(s, rec)
        doc = as_dict(rec)
    if args.format == "json":
        doc.pop("detail", None)
        out = {"schema": doc.get("schema"), "job_id": doc.get("job_id"), "diagnosis_id": rec.id, **doc}
        sys.stdout.write(json.dumps({"diagnosis": out, "summary": info}, indent=2, ensure_ascii=False) + "\n")
        return 0
    basis = stage_basis_phrase(diagnosis_from_dict(doc))
    print(f"diagnosis {info['diagnosis_id']} of job {shown(info['job_id'])}")
    for key in ("time", "status", "matched_pattern", "stage", "top_node", "events", "slack_thread"):
        value = info[key]
        said = shown(value) if value is not None else "-"
        said += f" ({basis})" if key == "stage" and basis else ""
        print(f"  {key.replace('_', ' ')}: {said}")
    print(f"  confirmed by: {', '.join(map(shown, info['confirmed_by'])) or '-'}")
    print(f"  rejected by: {', '.join(map(shown, info['rejected_by'])) or '-'}")
    for f in info["feedback"]:
        note = f" ({shown(f['note'])})" if f["note"] else ""
        print(f"    {f['time']} {f['verdict']} by {shown(f['user'])}"
              + (f", pattern {f['pattern_id']}" if f["pattern_id"] else "") + note)
    events = doc.get("events") or []
    if events:
        print("  events (most indicative first; `l4 patterns confirm ID --event N` takes the number):")
        for k, e in enumerate(events, start=1):
            print(f"  {k:4d}. [{e.get('score', 0):.2f}] {shown(e.get('template', ''))}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``diagnoses`` to the ``l4`` subcommands."""
    d = sub.add_parser("diagnoses", help="stored diagnoses: their IDs, status, matched pattern, verdicts")
    dsub = d.add_subparsers(dest="diagnoses_command", metavar="COMMAND")
    dsub.required = True
    p = dsub.add_parser("list", help="list stored diagnoses, newest first")
    p.add_argument("--job", metavar="J", help="only the diagnoses of job J")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N (default 20)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=_guard("diagnoses list", _list))
    p = dsub.add_parser("show", help="one diagnosis: job, time, status, matched pattern, verdicts, events")
    p.add_argument("id", type=int, metavar="ID")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.set_defaults(func=_guard("diagnoses show", _show))
