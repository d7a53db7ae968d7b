"""``l4 digest [--days N] [--post] [--channel C] [--format text|json] [--png FILE]``.

Prints the recurring-fault digest of the knowledge base (``$L4_DATABASE_URL``); with ``--post``
also posts it to Slack (``SLACK_BOT_TOKEN``, channel ``--channel`` or ``L4_DIGEST_CHANNEL``).
Exit status 0 on success, 2 for bad input or missing configuration (one line on stderr), 1 when the
database or Slack failed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _fail(message: str, status: int = 2) -> int:
    print(f"l4 digest: {message}", file=sys.stderr)
    return status


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [exc.__class__.__name__])[0][:300]


def cmd_digest(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from bot.config import Settings
    from bot.digest_blocks import DigestInputError, digest_png, digest_text, parse_days, post_digest
    from kb import KbError
    from kb.db import open_db, session
    from kb.digest import compute_digest

    try:
        days = parse_days(args.days)
    except DigestInputError as exc:
        return _fail(str(exc))
    settings = Settings.from_env()
    channel = args.channel or settings.digest_channel
    if args.post and not settings.slack_bot_token:
        return _fail("--post needs SLACK_BOT_TOKEN (see .env.example)")
    if args.post and not channel:
        return _fail("--post needs a channel: set L4_DIGEST_CHANNEL or pass --channel")
    engine = None
    try:
        engine = open_db(settings.database_url)
        with session(engine) as s:
            dg = compute_digest(s, days=days)
    except KbError as exc:
        return _fail(_first_line(exc))
    except SQLAlchemyError as exc:
        return _fail(f"database error: {_first_line(exc)}", 1)
    finally:
        if engine is not None:
            engine.dispose()
    if args.format == "json":
        sys.stdout.write(json.dumps(dg.to_dict(), indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(digest_text(dg) + "\n")
    if args.png:
        png = digest_png(dg)
        if png is None:
            print("l4 digest: no fault pattern in this period; no plot written", file=sys.stderr)
        else:
            try:
                Path(args.png).write_bytes(png)
            except OSError as exc:
                return _fail(f"cannot write {args.png}: {exc.strerror or exc}")
    if args.post:
        from slack_sdk.errors import SlackApiError, SlackClientError

        from bot.scheduler import web_client

        try:
            post_digest(web_client(settings), channel, dg)
        except SlackApiError as exc:
            return _fail(f"Slack refused the digest: {exc.response.get('error', 'unknown error')}", 1)
        except (SlackClientError, OSError) as exc:
            return _fail(f"could not reach Slack: {exc.__class__.__name__}: {_first_line(exc)}", 1)
        print(f"l4 digest: posted to {channel}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``digest`` to the ``l4`` subcommands."""
    p = sub.add_parser("digest", help="recurring faults, repeat-offender nodes and the unconfirmed backlog")
    p.add_argument("--days", default="7", metavar="N", help="window in days, 1..365 (default 7)")
    p.add_argument("--post", action="store_true", help="also post it to Slack (SLACK_BOT_TOKEN)")
    p.add_argument("--channel", help="Slack channel for --post (default: L4_DIGEST_CHANNEL)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--png", metavar="FILE", help="also write the pattern-counts plot to FILE")
    p.set_defaults(func=cmd_digest)
