"""The `l4` command line (CONTRACTS §2)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bot.config import ConfigError, load_dotenv
from engine.ingest import JobError

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT = 0, 1, 2


def _die(msg: str) -> int:
    print(f"l4: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _render(diagnosis, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(diagnosis.to_dict(), indent=2, ensure_ascii=False)
    if fmt == "html":
        from bot.render_html import render_html

        return render_html(diagnosis)
    from bot.render_text import render_text

    return render_text(diagnosis, color=sys.stdout.isatty())


def cmd_diagnose(args: argparse.Namespace) -> int:
    from bot.triage import TriageRequest, triage

    if args.top_nodes < 1:
        return _die("--top-nodes must be at least 1")
    req = TriageRequest(
        job=args.job, history=args.history or [], no_match=args.no_match, top_nodes=args.top_nodes,
        dask=args.dask,
    )
    from bot.progress import diagnose_progress, wants_progress

    with diagnose_progress(wants_progress(args.format)) as progress:
        result = triage(req, progress=progress, on_fetch=progress.fetched if progress else None)
    sys.stdout.write(_render(result.diagnosis, args.format) + "\n")
    if args.format == "text":
        print(f"(stored as diagnosis {result.diagnosis_id}; confirm its root cause with "
              f"`l4 patterns confirm {result.diagnosis_id} ...`)", file=sys.stderr)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    import random

    from bot.triage import TriageRequest, triage
    from engine.bench.generate import generate_case

    with tempfile.TemporaryDirectory(prefix="l4-demo-") as tmp:
        case = Path(tmp) / "demo-job"
        truth = generate_case(case, args.kind, args.style, random.Random(args.seed), nodes=8,
                              ranks_per_node=4, iterations=60, history_jobs=2)
        history = sorted(p for p in (case / "history").iterdir() if p.is_dir())
        print(f"Generated a failed {args.style} job ({truth['kind']}, faulty node "
              f"{', '.join(truth['faulty_nodes']) or '-'}, iteration {truth['iteration']}) "
              f"with {len(history)} succeeded history jobs in {case}\n", file=sys.stderr)
        # a throwaway knowledge base (the built-in library only) unless one is configured
        url = os.environ.get("L4_DATABASE_URL") or f"sqlite:///{Path(tmp) / 'demo-kb.db'}"
        req = TriageRequest(job=str(case / "failed"), history=[str(h) for h in history], database_url=url)
        sys.stdout.write(_render(triage(req).diagnosis, args.format) + "\n")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="l4", description="Diagnose failed LLM training jobs from their logs.")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("diagnose", help="diagnose a failed job")
    d.add_argument("job", help="job folder, job ID under L4_LOG_ROOT, or failure-report link")
    d.add_argument(
        "--history",
        action="append",
        metavar="JOB",
        help="folder of a succeeded job of the same family (repeatable)",
    )
    d.add_argument(
        "--no-match", action="store_true", help="skip the knowledge-base match; always run the engine"
    )
    d.add_argument("--format", choices=["text", "json", "html"], default="text")
    d.add_argument("--top-nodes", type=int, default=5, metavar="K")
    d.add_argument("--dask", metavar="ADDRESS", default=None,
                   help="scan the rank files on this Dask cluster (tcp://host:8786; "
                        "default: L4_DASK_SCHEDULER)")
    d.set_defaults(func=cmd_diagnose)

    demo = sub.add_parser("demo", help="generate a small failed job with history and diagnose it")
    demo.add_argument("--kind", default="xid79", help="fault kind to inject (see `l4 bench kinds`)")
    demo.add_argument("--style", default="megatron", choices=["megatron", "deepspeed", "mindspore"])
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--format", choices=["text", "json", "html"], default="text")
    demo.set_defaults(func=cmd_demo)

    from bot.cli_bench import register as register_bench

    register_bench(sub)
    from bot.cli_kb import register as register_kb

    register_kb(sub)
    from bot.cli_digest import register as register_digest

    register_digest(sub)
    from bot.cli_bot import register as register_bot

    register_bot(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="l4: %(message)s")
    logging.getLogger("be.kuleuven.dtai.distance").setLevel(logging.ERROR)
    parser = build_parser()
    args = parser.parse_args(argv)
    load_dotenv()
    try:
        return int(args.func(args) or 0)
    except (JobError, ConfigError) as exc:
        return _die(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - one line for the user, the trace only with L4_DEBUG
        if os.environ.get("L4_DEBUG"):
            raise
        print(
            f"l4: internal error: {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            " (set L4_DEBUG=1 for the trace)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
