"""Job folders of the Slack tests: one fault that no built-in pattern knows, on two jobs."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.jobs import make_job

# A fault no built-in pattern names, with text that would ping a whole channel if it were not escaped.
FAULT = ("[rank{r}]: [2026-05-01 10:03:00,123] [ERROR] MyStore client lost lease on shard 17 after 5 "
         "retries <!channel> <@U0BOSS> & <https://evil.example|click>")


def fault_job(root: Path, fault_node: int) -> Path:
    return make_job(root, nodes=3, ranks_per_node=2, iterations=25, fault_node=fault_node, fault_at=20,
                    fault_lines=(FAULT.format(r=fault_node * 2),))


@pytest.fixture
def log_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "jobs"
    fault_job(root / "job-0001", fault_node=1)
    fault_job(root / "job-0002", fault_node=2)
    monkeypatch.setenv("L4_LOG_ROOT", str(root))
    monkeypatch.delenv("L4_DATABASE_URL", raising=False)
    return root
