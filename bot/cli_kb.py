"""Knowledge-base subcommands of the ``l4`` CLI: patterns, learn, db.

``register(sub)`` adds them to the CLI's subparsers; each sets ``func`` (args -> exit status):
0 success, 2 bad input (one line on stderr), 1 internal failure. The database is
``$L4_DATABASE_URL`` (default: a SQLite file in the user's data folder).
"""
from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable
from pathlib import Path

import yaml
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import select

from engine.model import CATEGORIES

Handler = Callable[[argparse.Namespace], int]


def _default_user() -> str:
    try:
        return os.environ.get("L4_USER") or getpass.getuser()
    except Exception:  # noqa: BLE001  (no passwd entry in some containers)
        return "unknown"


def _fail(cmd: str, message: str, status: int = 2) -> int:
    print(f"l4 {cmd}: {message}", file=sys.stderr)
    return status


def _guard(cmd: str, fn: Handler) -> Handler:
    """Map KbError to status 2 and database errors to status 1, each with one stderr line."""
    def run(args: argparse.Namespace) -> int:
        from kb import KbError

        try:
            return fn(args)
        except KbError as exc:
            return _fail(cmd, str(exc).splitlines()[0] if str(exc) else "bad input")
        except SQLAlchemyError as exc:
            return _fail(cmd, f"database error: {str(exc).splitlines()[0]}", 1)
    return run


def _open(*, keeps: bool = False):  # noqa: ANN202
    """A session on the knowledge base; `keeps`: the command exists to store something, so an
    in-memory database (gone at exit) is refused rather than pretending to keep it."""
    from kb import KbError
    from kb.db import ENV_VAR, is_in_memory, open_db, session

    if keeps and is_in_memory():
        raise KbError(f"{ENV_VAR} is an in-memory database: nothing would be kept; "
                      "set it to a file or server")
    return session(open_db())


def _event_templates(session, diagnosis_id: int, wanted: list[str]) -> list[str]:  # noqa: ANN001
    """The templates `wanted` names (each an event's template, or its number in `l4 diagnoses show`),
    refusing any that is not an event of the diagnosis."""
    from kb import KbError
    from kb.diagnoses import as_dict, get

    events = [e.get("template", "") for e in as_dict(get(session, diagnosis_id)).get("events") or []]
    out = []
    for w in wanted:
        if w in events:
            out.append(w)
        elif w.strip().isdigit() and 1 <= int(w) <= len(events):
            out.append(events[int(w) - 1])
        else:
            raise KbError(f"--event {w!r} is not an event of diagnosis {diagnosis_id} "
                          f"(it has {len(events)}; see `l4 diagnoses show {diagnosis_id}`)")
    return out


def _patterns_list(args: argparse.Namespace) -> int:
    from kb.library import library_meta
    from kb.models import FaultPattern

    with _open() as s:
        stmt = select(FaultPattern).order_by(FaultPattern.category, FaultPattern.id)
        rows = [p for p in s.exec(stmt)
                if (args.all or p.enabled) and (not args.category or p.category == args.category)]
    for p in rows:
        flags = ",".join(f for f, on in (("disabled", not p.enabled), ("flagged", p.flagged)) if on)
        ref = (library_meta().get(p.id) or {}).get("reference") or "-"
        print(f"{p.id:<45} {p.category:<30} {p.kind:<7} {p.severity:<8} {p.source:<9} "
              f"{flags or '-':<10} {p.title}  [source: {ref}]")
    print(f"{len(rows)} pattern(s)", file=sys.stderr)
    return 0


def _patterns_show(args: argparse.Namespace) -> int:
    from kb import KbError
    from kb.feedback import feedback_for
    from kb.library import provenance
    from kb.models import FaultPattern
    from kb.patterns_io import pattern_to_dict

    with _open() as s:
        p = s.get(FaultPattern, args.id)
        if p is None:
            raise KbError(f"no pattern with id {args.id}")
        d = pattern_to_dict(p, full=True)
        fb = feedback_for(s, pattern_id=p.id)
        d["feedback"] = {"confirmed": sum(f.verdict == "confirm" for f in fb),
                         "rejected": sum(f.verdict == "reject" for f in fb)}
        d.update(provenance(p.id, p.signature))
    sys.stdout.write(yaml.safe_dump(d, sort_keys=False, allow_unicode=True, width=100))
    return 0


def _patterns_add(args: argparse.Namespace) -> int:
    from kb.patterns_io import add_patterns, read_patterns_file

    items = read_patterns_file(args.file)
    with _open(keeps=True) as s:
        created = add_patterns(s, items, user=args.user)
        s.commit()
    for p in created:
        print(f"added {p.id}")
    return 0


def _patterns_confirm(args: argparse.Namespace) -> int:
    from kb.feedback import confirm

    with _open(keeps=True) as s:
        events = _event_templates(s, args.diagnosis_id, args.event)
        p = confirm(s, args.diagnosis_id, events=events, title=args.title, category=args.category,
                    remediation=args.remediation, user=args.user, kind=args.kind, severity=args.severity)
        s.commit()
    print(f"confirmed: created pattern {p.id}")
    return 0


def _set_enabled(enabled: bool) -> Handler:
    def handler(args: argparse.Namespace) -> int:
        from kb import KbError
        from kb.models import FaultPattern

        with _open(keeps=True) as s:
            p = s.get(FaultPattern, args.id)
            if p is None:
                raise KbError(f"no pattern with id {args.id}")
            p.enabled = enabled
            s.add(p)
            s.commit()
        print(f"{'enabled' if enabled else 'disabled'} {args.id}")
        return 0
    return handler


def _patterns_export(args: argparse.Namespace) -> int:
    from kb import KbError
    from kb.patterns_io import export_patterns

    with _open() as s:
        text = export_patterns(s)
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise KbError(f"cannot write {args.out}: {exc.strerror or exc}") from None
        print(f"exported to {args.out}", file=sys.stderr)
    return 0


def _patterns_import(args: argparse.Namespace) -> int:
    from kb.patterns_io import import_patterns, read_patterns_file

    items = read_patterns_file(args.file)
    with _open(keeps=True) as s:
        result = import_patterns(s, items, user=args.user, force=args.force)
        s.commit()
    for pair in result["copied"]:
        builtin, copy = pair.split(" -> ")
        print(f"l4 patterns import: {builtin} is built-in; your version was added as {copy} "
              f"(--force replaces the built-in)", file=sys.stderr)
    for pid in result["replaced_builtin"]:
        print(f"l4 patterns import: warning: built-in pattern {pid} replaced (--force); library "
              f"updates no longer reach it", file=sys.stderr)
    print(", ".join(f"{len(v)} {k.replace('_', ' ')}" for k, v in result.items() if v or k in
                    ("added", "updated", "unchanged")))
    return 0


def _learn(args: argparse.Namespace) -> int:
    from kb import KbError
    from kb.pools import family_key, learn

    job = Path(args.job_folder)
    if not job.is_dir():
        raise KbError(f"not a job folder: {job}")
    try:
        from engine.parse import parse_job
    except ImportError:
        return _fail("learn", "the engine's parser (engine.parse.parse_job) is not available", 1)
    parsed = parse_job(job)
    if parsed.status == "failed":
        raise KbError(f"job {parsed.job_id} failed; only succeeded jobs can be learned")
    with _open(keeps=True) as s:
        added = learn(s, parsed)
        s.commit()
    key = family_key(parsed.settings)[:12]
    if added:
        print(f"learned {len(parsed.templates)} templates of job {parsed.job_id} into family {key}")
    else:
        print(f"job {parsed.job_id} was already learned (family {key})")
    return 0


def _db_upgrade(args: argparse.Namespace) -> int:
    from kb.db import current_revision, open_db

    engine = open_db(load_library=False)  # migrates; a database it cannot open is bad input (2)
    try:
        print(f"database at revision {current_revision(engine)}")
    finally:
        engine.dispose()
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``patterns``, ``learn`` and ``db`` to the ``l4`` subcommands."""
    user_kw = {"default": _default_user(), "help": "who does this (default: $L4_USER or login name)"}

    pat = sub.add_parser("patterns", help="fault patterns of the knowledge base")
    psub = pat.add_subparsers(dest="patterns_command", metavar="COMMAND")
    psub.required = True

    p = psub.add_parser("list", help="list patterns")
    p.add_argument("--all", action="store_true", help="include disabled patterns")
    p.add_argument("--category", choices=CATEGORIES)
    p.set_defaults(func=_guard("patterns list", _patterns_list))

    p = psub.add_parser("show", help="show one pattern")
    p.add_argument("id")
    p.set_defaults(func=_guard("patterns show", _patterns_show))

    p = psub.add_parser("add", help="add pattern(s) from a YAML file")
    p.add_argument("--file", required=True, help="YAML: one pattern, a list, or {patterns: [...]}")
    p.add_argument("--user", **user_kw)
    p.set_defaults(func=_guard("patterns add", _patterns_add))

    p = psub.add_parser("confirm", help="confirm a diagnosis: create a pattern from chosen events")
    p.add_argument("diagnosis_id", type=int)
    p.add_argument("--event", action="append", required=True, metavar="TEMPLATE",
                   help="an event of the diagnosis to use as signature: its template or its number in "
                        "`l4 diagnoses show ID` (repeat for several)")
    p.add_argument("--title", required=True)
    p.add_argument("--category", required=True, choices=CATEGORIES)
    p.add_argument("--remediation", required=True)
    p.add_argument("--kind", default="root", choices=("root", "cascade"))
    p.add_argument("--severity", default="high", choices=("critical", "high", "medium", "low"))
    p.add_argument("--user", required=True)
    p.set_defaults(func=_guard("patterns confirm", _patterns_confirm))

    p = psub.add_parser("disable", help="disable a pattern")
    p.add_argument("id")
    p.set_defaults(func=_guard("patterns disable", _set_enabled(False)))

    p = psub.add_parser("enable", help="enable a pattern again")
    p.add_argument("id")
    p.set_defaults(func=_guard("patterns enable", _set_enabled(True)))

    p = psub.add_parser("export", help="export all patterns as YAML")
    p.add_argument("--out", help="file to write (default: standard output)")
    p.set_defaults(func=_guard("patterns export", _patterns_export))

    p = psub.add_parser("import", help="import (upsert) patterns from a YAML export; a changed built-in "
                                       "is added as your own copy (<id>-sre)")
    p.add_argument("file")
    p.add_argument("--force", action="store_true",
                   help="replace built-in patterns whose content differs (with a warning)")
    p.add_argument("--user", **user_kw)
    p.set_defaults(func=_guard("patterns import", _patterns_import))

    p = sub.add_parser("learn", help="add a succeeded job's events to its family's normal pool")
    p.add_argument("job_folder")
    p.set_defaults(func=_guard("learn", _learn))

    db = sub.add_parser("db", help="knowledge-base database maintenance")
    dsub = db.add_subparsers(dest="db_command", metavar="COMMAND")
    dsub.required = True
    p = dsub.add_parser("upgrade", help="migrate the database to the newest schema")
    p.set_defaults(func=_guard("db upgrade", _db_upgrade))
