"""The benchmark's ``pool`` history mode through the real knowledge base.

Each case gets a fresh temporary SQLite knowledge base; every history job is parsed on its own and
learned with `kb.pools.learn` (what `l4 learn` does), and the pool is read back for the failed job's
family the way `bot.triage` reads it.
"""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from engine.ingest import discover
from engine.parse import parse_job
from kb import db as kbdb
from kb import pools


def kb_pool(failed: Path, history: Sequence[Path]) -> set[str]:
    """Learn `history` into a throwaway knowledge base; the normal pool of `failed`'s family."""
    with tempfile.TemporaryDirectory(prefix="l4-bench-kb-") as tmp:
        engine = kbdb.open_db(f"sqlite:///{Path(tmp) / 'kb.db'}", load_library=False)
        try:
            with kbdb.session(engine) as s:
                for job in history:
                    pools.learn(s, parse_job(job))
                s.commit()
            with kbdb.session(engine) as s:
                return pools.normal_templates(s, discover(failed).settings)
        finally:
            engine.dispose()
