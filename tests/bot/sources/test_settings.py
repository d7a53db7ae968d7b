"""The fetch and cache settings read from the environment."""
import pytest

from bot.config import ConfigError, Settings


def test_fetch_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("L4_REPORT_NETWORKS", "10.20.0.0/16, fd00::/8")
    monkeypatch.setenv("L4_FETCH_TIMEOUT", "2.5")
    monkeypatch.setenv("L4_FETCH_MAX_BYTES", "1000")
    monkeypatch.setenv("L4_CACHE_DIR", "/tmp/l4c")
    s = Settings.from_env()
    assert s.report_networks == ["10.20.0.0/16", "fd00::/8"] and s.fetch_timeout == 2.5
    assert s.fetch_max_bytes == 1000 and s.cache_dir == "/tmp/l4c" and s.max_decompress_ratio == 200
    monkeypatch.setenv("L4_MAX_DECOMPRESS_RATIO", "0")
    with pytest.raises(ConfigError, match="L4_MAX_DECOMPRESS_RATIO must be greater than 0"):
        Settings.from_env()
    monkeypatch.setenv("L4_MAX_DECOMPRESS_RATIO", "lots")
    with pytest.raises(ConfigError, match="L4_MAX_DECOMPRESS_RATIO must be a number"):
        Settings.from_env()
