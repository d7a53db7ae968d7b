"""Settings for fetch tests: 127.0.0.1 allowlisted, short timeouts, a cache in tmp_path."""
from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import Settings
from bot.sources import netguard


@pytest.fixture
def make_settings(tmp_path: Path):
    def make(**overrides) -> Settings:
        values = dict(
            log_root=str(tmp_path / "jobs"),
            report_hosts=["127.0.0.1"],
            cache_dir=str(tmp_path / "cache"),
            fetch_timeout=1.0,
            fetch_time_limit=10.0,
            fetch_max_bytes=64 << 20,
            cache_max_bytes=1 << 30,
        )
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch):
    """Map hostnames to addresses in L4's own resolver (no real DNS in tests)."""
    table: dict[str, list[str]] = {}

    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError("unknown host")
        return table[host]

    monkeypatch.setattr(netguard, "resolve_addresses", resolve)
    return table
