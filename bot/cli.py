"""The `l4` command line (CONTRACTS.md §2, §5)."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from bot.config import ConfigError, load_dotenv
from engine.ingest import JobError
from engine.interrupts import hold_interrupt
from kb import KbError

EXIT_OK, EXIT_INTERNAL, EXIT_BAD_INPUT = 0, 1, 2


def _die(msg: str) -> int:
    print(f"l4: {msg}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _render(diagnosis, fmt: str, diagnosis_id: int | None = None) -> str:
    if fmt == "json":
        d = diagnosis.to_dict()
        if diagnosis_id is not None:  # optional field of l4.diagnosis/v1 (CONTRACTS.md §5)
            d = {"schema": d["schema"], "job_id": d["job_id"], "diagnosis_id": diagnosis_id, **d}
        return json.dumps(d, indent=2, ensure_ascii=False)
    if fmt == "html":
        from bot.render_html import render_html

        return render_html(diagnosis, diagnosis_id=diagnosis_id)
    from bot.render_text import render_text

    tty = sys.stdout.isatty()  # a terminal wraps at its width; a pipe or file gets whole lines
    return render_text(diagnosis, color=tty, diagnosis_id=diagnosis_id, terminal=tty,
                       width=shutil.get_terminal_size((120, 24)).columns)


def cmd_diagnose(args: argparse.Namespace) -> int:
    from bot.triage import TriageRequest, triage
    from kb.db import is_in_memory

    if args.top_nodes < 1:
        return _die("--top-nodes must be at least 1")
    req = TriageRequest(
        job=args.job, history=args.history or [], no_match=args.no_match, top_nodes=args.top_nodes,
        dask=args.dask,
    )
    from bot.progress import diagnose_progress, wants_progress

    with diagnose_progress(wants_progress(args.format)) as progress:
        result = triage(req, progress=progress, on_fetch=progress.fetched if progress else None)
    kept = not is_in_memory()
    sys.stdout.write(_render(result.diagnosis, args.format, result.diagnosis_id if kept else None) + "\n")
    if not kept:  # an ID into a database that vanishes at exit would be a lie
        print("l4: not stored: L4_DATABASE_URL is an in-memory database, gone when l4 exits "
              "(set it to a file or server to keep diagnoses)", file=sys.stderr)
    elif args.format == "text":
        print(f"(stored as diagnosis {result.diagnosis_id}; confirm its root cause with "
              f"`l4 patterns confirm {result.diagnosis_id} ...`)", file=sys.stderr)
    return EXIT_OK


def _demo_folder(keep: str | None) -> contextlib.AbstractContextManager[str]:
    """Where the demo job goes: `keep` (created; it must not hold files yet) or a temporary folder."""
    if keep is None:
        return tempfile.TemporaryDirectory(prefix="l4-demo-")
    folder = Path(keep)
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise JobError(f"--keep {keep}: the folder exists and is not empty")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise JobError(f"--keep {keep}: cannot create the folder ({exc.strerror or exc})") from None
    return contextlib.nullcontext(str(folder))


def cmd_demo(args: argparse.Namespace) -> int:
    import random

    from bot.triage import TriageRequest, triage
    from engine.bench.generate import FAULT_KINDS, OPT_IN_KINDS, generate_case
    from kb.db import is_in_memory

    if args.kind not in FAULT_KINDS + OPT_IN_KINDS:
        known = ", ".join(FAULT_KINDS + OPT_IN_KINDS)
        return _die(f"--kind {args.kind!r} is not a fault kind; known kinds: {known}")
    with _demo_folder(args.keep) as tmp, tempfile.TemporaryDirectory(prefix="l4-demo-kb-") as kb_tmp:
        case = Path(tmp) / "demo-job"
        truth = generate_case(case, args.kind, args.style, random.Random(args.seed), nodes=8,
                              ranks_per_node=4, iterations=60, history_jobs=2)
        history = sorted(p for p in (case / "history").iterdir() if p.is_dir())
        where = (f"in {case} (kept)" if args.keep else
                 "in a temporary folder, deleted on exit (keep it with --keep DIR)")
        print(f"Generated a failed {args.style} job ({truth['kind']}, faulty node "
              f"{', '.join(truth['faulty_nodes']) or '-'}, iteration {truth['iteration']}) "
              f"with {len(history)} succeeded history jobs {where}\n", file=sys.stderr)
        # a throwaway knowledge base (the built-in library only) unless one is configured
        url = os.environ.get("L4_DATABASE_URL") or f"sqlite:///{Path(kb_tmp) / 'demo-kb.db'}"
        req = TriageRequest(job=str(case / "failed"), history=[str(h) for h in history], database_url=url)
        result = triage(req)
        kept = os.environ.get("L4_DATABASE_URL") and not is_in_memory(url)  # else a throwaway KB
        shown_id = result.diagnosis_id if kept else None
        sys.stdout.write(_render(result.diagnosis, args.format, shown_id) + "\n")
    if args.keep:
        print(f"Diagnose it again: l4 diagnose {case / 'failed'} "
              + " ".join(f"--history {h}" for h in history), file=sys.stderr)
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
    demo.add_argument("--kind", default="xid79",
                      help="fault kind to inject (default xid79; the names of `l4 bench generate --kinds`; "
                           "a wrong name lists them)")
    demo.add_argument("--style", default="megatron", choices=["megatron", "deepspeed", "mindspore"])
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument("--format", choices=["text", "json", "html"], default="text")
    demo.add_argument("--keep", metavar="DIR",
                      help="write the generated jobs into DIR (new or empty) and keep them; default: a "
                           "temporary folder, deleted on exit")
    demo.set_defaults(func=cmd_demo)

    from bot.cli_bench import register as register_bench

    register_bench(sub)
    from bot.cli_kb import register as register_kb

    register_kb(sub)
    from bot.cli_diagnoses import register as register_diagnoses

    register_diagnoses(sub)
    from bot.cli_digest import register as register_digest

    register_digest(sub)
    from bot.cli_bot import register as register_bot

    register_bot(sub)
    return p


class Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception so that it stops the work like Ctrl-C does."""


_MAIN_PID = os.getpid()


# The interrupts the main process received during `main`. The exception a handler raises can be
# swallowed ("Exception ignored in …") when the signal lands in a function Python calls itself, e.g.
# logging's fork hooks while a process pool starts; the work then ends normally, and this list is
# what still makes the exit code say the run was interrupted.
_RECEIVED: list[int] = []


def _on_sigterm(signum: int, frame: object) -> None:
    if os.getpid() != _MAIN_PID:  # a forked pool worker terminated before its initializer ran
        os._exit(128 + signal.SIGTERM)
    if hold_interrupt(signum):  # a pool is forking: raised again right after (engine.interrupts)
        return
    _RECEIVED.append(signal.SIGTERM)
    raise Terminated()


def _on_sigint(signum: int, frame: object) -> None:
    if os.getpid() == _MAIN_PID:
        if hold_interrupt(signum):  # a pool is forking: raised again right after (engine.interrupts)
            return
        _RECEIVED.append(signal.SIGINT)
    signal.default_int_handler(signum, frame)


INTERRUPT_CODES = frozenset({128 + signal.SIGINT, 128 + signal.SIGTERM})


def _interrupted(exc: KeyboardInterrupt) -> int:
    from engine.executors import stop_all_pools

    stop_all_pools()  # the pool's workers, wherever the interrupt landed
    name = "SIGTERM" if isinstance(exc, Terminated) else "SIGINT"
    print(f"l4: interrupted ({name}); stopped", file=sys.stderr)
    return 128 + (signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)


def _leave_the_heap_to_the_os() -> None:
    """At exit, move every object to the collector's permanent generation: the interpreter's last
    collections then skip the millions of objects of numpy, scikit-learn, matplotlib and the rest
    (seconds on a busy machine, at every end of `l4 bot` and of each command). The atexit handlers,
    module teardown and the flush of stdout/stderr still run; what a command writes is committed
    and closed before it returns."""
    gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="l4: %(message)s")
    atexit.unregister(_leave_the_heap_to_the_os)  # once, however often main runs in one process
    atexit.register(_leave_the_heap_to_the_os)
    logging.getLogger("be.kuleuven.dtai.distance").setLevel(logging.ERROR)
    parser = build_parser()
    args = parser.parse_args(argv)
    load_dotenv()
    _RECEIVED.clear()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
    code = _run_command(args)
    if _RECEIVED and code not in INTERRUPT_CODES:  # an interrupt whose exception was swallowed
        return _interrupted(Terminated() if _RECEIVED[-1] == signal.SIGTERM else KeyboardInterrupt())
    return code


def _run_command(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except (JobError, ConfigError, KbError) as exc:
        return _die(str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
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


def run() -> None:
    """The `l4` command: `main`, then the process ends with its exit code. After an interrupt the
    exit handlers run and the process ends at once: Python sets a process-wide flag when Ctrl-C
    lands in code run from a string (`exec("from numpy import *")` in a lazy import), keeps it
    though `main` handled the interrupt, and at the end of finalisation kills itself with SIGINT
    instead of exiting with `main`'s 130."""
    code = main()
    if code in INTERRUPT_CODES:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
