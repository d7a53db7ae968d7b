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
