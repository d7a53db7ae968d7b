"""Make the README's example digest and HTML report (``python -m bot.make_readme_images [OUT]``).

Writes into OUT (default ``deploy/examples``):

- ``report.html`` — ``l4 diagnose --format html`` of a generated failed job (Xid 79 on one node,
  Megatron-style logs, two succeeded history jobs), and its three plots as PNG files;
- ``digest.txt``, ``digest-blocks.json`` and ``digest-patterns.png`` — ``l4 digest`` of a demo
  knowledge base seeded with four weeks of made-up diagnoses (a fixed seed and a fixed "now");
- ``report-screenshot.png`` — the top of ``report.html`` as a browser shows it, when a headless
  Chromium is on the PATH (``chromium``; skipped with a note otherwise).

Everything is generated in a temporary folder; nothing touches the configured knowledge base.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlmodel import Session

DEMO_NOW = datetime(2026, 6, 15, 9, 0, tzinfo=UTC)  # a Monday, when the weekly digest runs
DEMO_CHANNEL = "C0L4TRIAGE"

# (pattern id, diagnoses in the previous week, in this week, nodes it strikes)
_DEMO_PATTERNS = [
    ("xid-79-fallen-off-bus", 1, 4, ["gpu-a017", "gpu-a017", "gpu-a017", "gpu-b102", "gpu-c044"]),
    ("nccl-ib-completion-error", 3, 3,
     ["gpu-b102", "gpu-b102", "gpu-c210", "gpu-a003", "gpu-c044", "gpu-b102"]),
    ("cuda-out-of-memory", 4, 2, []),
    ("xid-48-double-bit-ecc", 0, 2, ["gpu-c044", "gpu-a091"]),
    ("disk-full", 2, 1, []),
    ("network-fs-not-responding", 2, 0, []),
]


def _store_demo(s: Session, rng: random.Random, job: str, pattern: str | None, nodes: list[str],
                when: datetime, *, posted: bool) -> int:
    from engine.model import Diagnosis, Match, NodeFinding
    from kb import diagnoses

    d = Diagnosis(job_id=job, status="matched" if pattern else "analyzed", stage="training",
                  nodes=[NodeFinding(node=n, score=round(rng.uniform(0.62, 0.97), 2)) for n in nodes])
    if pattern:
        d.matches = [Match(pattern_id=pattern, title=pattern, category="")]
    ts = f"{int(when.timestamp())}.{rng.randint(100000, 999999)}" if posted else None
    return diagnoses.store(s, d, {"model": "llama-70b", "framework": "megatron"}, diagnosed_at=when,
                           requested_at=when - timedelta(seconds=rng.randint(40, 900)),
                           slack_channel=DEMO_CHANNEL if posted else None, slack_thread_ts=ts)


def seed_demo(s: Session, now: datetime = DEMO_NOW, seed: int = 4) -> None:
    """Four weeks of made-up diagnoses, node incidents and SRE verdicts. Commits."""
    from kb import feedback
    from kb.models import Feedback

    rng = random.Random(seed)
    n = 0
    diagnosed: dict[str, tuple[str, list[str], datetime]] = {}
    for pid, before, during, nodes in _DEMO_PATTERNS:
        for week, count in ((1, before), (0, during)):
            for _ in range(count):
                n += 1
                when = now - timedelta(days=7 * week + rng.uniform(0.2, 6.8))
                node = [nodes[(n + week) % len(nodes)]] if nodes else []
                _store_demo(s, rng, f"job-{4100 + n}", pid, node, when, posted=rng.random() < 0.8)
                diagnosed[f"job-{4100 + n}"] = (pid, node, when)
    for age_days in (20, 25):  # older history of the same patterns
        n += 1
        _store_demo(s, rng, f"job-{4100 + n}", "xid-79-fallen-off-bus", ["gpu-a017"],
                    now - timedelta(days=age_days), posted=True)
    confirmed = []
    for i, node in enumerate(["gpu-a017", "gpu-d230", None, None]):  # engine-only diagnoses
        n += 1
        when = now - timedelta(days=1.5 + i * 1.3)
        did = _store_demo(s, rng, f"job-{4100 + n}", None, [node] if node else [], when, posted=True)
        if i == 0:
            confirmed.append((did, when))
    s.commit()
    for did, when in confirmed:
        feedback.confirm(s, did, events=["NVRM: GPU <*>: GPU has fallen off the bus. <*>"],
                         title="Xid 79 after a firmware update", category="hardware/accelerator",
                         remediation="Roll back the GPU firmware on the node, then drain it.", user="U0SRE1")
        fb = s.get(Feedback, max(f.id for f in feedback.feedback_for(s, diagnosis_id=did)))
        fb.created_at = when + timedelta(hours=3, minutes=12)
        s.add(fb)
    again = random.Random(seed + 1)  # jobs asked about again (they count once); own dice, same demo
    for job, later in (("job-4102", timedelta(minutes=40)), ("job-4110", timedelta(hours=2))):
        pid, node, when = diagnosed[job]
        _store_demo(s, again, job, pid, node, when + later, posted=job == "job-4102")
    s.commit()


def make_report(out: Path, tmp: Path) -> None:
    from bot.plots import diagnosis_pngs
    from bot.render_html import render_html
    from bot.triage import TriageRequest, triage
    from engine.bench.generate import generate_case

    case = tmp / "job-4242"
    generate_case(case, "xid79", "megatron", random.Random(7), nodes=8, ranks_per_node=4, iterations=60,
                  history_jobs=2)
    history = sorted(str(p) for p in (case / "history").iterdir() if p.is_dir())
    result = triage(TriageRequest(job=str(case / "failed"), history=history,
                                  database_url=f"sqlite:///{tmp / 'report-kb.db'}"))
    d = result.diagnosis
    (out / "report.html").write_text(render_html(d), encoding="utf-8")
    for name, png in diagnosis_pngs(d):
        (out / name.replace(f"{d.job_id}-", "report-", 1)).write_bytes(png)


def make_digest(out: Path, tmp: Path) -> None:
    from bot.digest_blocks import digest_blocks, digest_png, digest_text
    from kb.db import open_db, session
    from kb.digest import compute_digest

    engine = open_db(f"sqlite:///{tmp / 'digest-kb.db'}")
    try:
        with session(engine) as s:
            seed_demo(s)
            dg = compute_digest(s, days=7, now=DEMO_NOW)
    finally:
        engine.dispose()
    (out / "digest.txt").write_text(digest_text(dg) + "\n", encoding="utf-8")
    (out / "digest-blocks.json").write_text(json.dumps({"blocks": digest_blocks(dg)}, indent=1,
                                                       ensure_ascii=False) + "\n", encoding="utf-8")
    png = digest_png(dg)
    if png is not None:
        (out / "digest-patterns.png").write_bytes(png)


SCREENSHOT_SIZE = (1200, 1300)


def make_screenshot(out: Path, tmp: Path) -> bool:
    """``report-screenshot.png`` of ``report.html`` with a headless Chromium; False without one."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        return False
    width, height = SCREENSHOT_SIZE
    # no network at all: the report is self-contained, and Chromium must not phone home
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp / 'chromium'}", "--hide-scrollbars", f"--window-size={width},{height}",
           f"--screenshot={out / 'report-screenshot.png'}", (out / "report.html").resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    return done.returncode == 0 and (out / "report-screenshot.png").is_file()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bot.make_readme_images", description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default="deploy/examples",
                   help="folder to write (default deploy/examples)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="l4-readme-") as tmp:
        make_digest(out, Path(tmp))
        make_report(out, Path(tmp))
        if not make_screenshot(out, Path(tmp)):
            print("no headless Chromium: report-screenshot.png not made", file=sys.stderr)
    for f in sorted(out.iterdir()):
        print(f"{f}  ({f.stat().st_size:,} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
