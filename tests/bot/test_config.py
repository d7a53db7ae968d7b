"""Configuration from the environment and from .env."""
import os
from pathlib import Path

import pytest

from bot.config import ConfigError, Settings, load_dotenv


def test_dotenv_fills_only_unset_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = tmp_path / ".env"
    env.write_text("# comment\nL4_TEST_A=from-file\nexport L4_TEST_B='quoted # not a comment'\n"
                   "L4_TEST_C=plain # trailing comment\nnot a line\n")
    monkeypatch.setenv("L4_TEST_A", "from-env")
    monkeypatch.delenv("L4_TEST_B", raising=False)
    monkeypatch.delenv("L4_TEST_C", raising=False)
    try:
        assert sorted(load_dotenv(env)) == ["L4_TEST_B", "L4_TEST_C"]
        assert os.environ["L4_TEST_A"] == "from-env"
        assert os.environ["L4_TEST_B"] == "quoted # not a comment"
        assert os.environ["L4_TEST_C"] == "plain"
    finally:
        os.environ.pop("L4_TEST_B", None)
        os.environ.pop("L4_TEST_C", None)


def test_settings_parse_lists_and_reject_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("L4_SRE_USERS", " U1, U2 ,")
    monkeypatch.setenv("L4_REPORT_HOSTS", "Reports.Example.com")
    s = Settings.from_env()
    assert s.sre_users == ["U1", "U2"] and s.report_hosts == ["reports.example.com"]
    monkeypatch.setenv("L4_WORKERS", "many")
    with pytest.raises(ConfigError, match="L4_WORKERS"):
        Settings.from_env()
    monkeypatch.setenv("L4_WORKERS", "2")
    monkeypatch.setenv("L4_JOB_ID_PATTERN", "job-(")
    with pytest.raises(ConfigError, match="L4_JOB_ID_PATTERN"):
        Settings.from_env()


def test_lease_and_health_port_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("L4_LEASE_SECONDS", "L4_HEALTH_PORT"):
        monkeypatch.delenv(name, raising=False)
    s = Settings.from_env()
    assert s.lease_seconds == 120.0 and s.health_port is None  # no health server unless asked
    monkeypatch.setenv("L4_LEASE_SECONDS", "7.5")
    monkeypatch.setenv("L4_HEALTH_PORT", "8080")
    s = Settings.from_env()
    assert s.lease_seconds == 7.5 and s.health_port == 8080
    for name, bad in (("L4_LEASE_SECONDS", "0"), ("L4_LEASE_SECONDS", "soon"), ("L4_HEALTH_PORT", "70000"),
                      ("L4_HEALTH_PORT", "http")):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ConfigError) as e:
            Settings.from_env()
        assert name in str(e.value) and "\n" not in str(e.value)
        monkeypatch.setenv(name, "8080")
