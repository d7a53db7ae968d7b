"""The bot's and CLI's configuration: environment variables, and `.env` in the working folder.

Every variable is documented in `.env.example`. `load_dotenv()` runs once at CLI start; values
already in the environment win over `.env`. `Settings.from_env()` reads a snapshot.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_JOB_ID_PATTERN = r"job-[A-Za-z0-9][A-Za-z0-9._-]*"
DEFAULT_DIGEST_CRON = "0 9 * * mon"  # Mondays 09:00 UTC
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


class ConfigError(ValueError):
    """A configuration value is missing or malformed (message is one line, safe to show)."""


def load_dotenv(path: Path | str = ".env") -> list[str]:
    """Put KEY=VALUE lines of `path` into os.environ where not already set; returns keys set."""
    p = Path(path)
    if not p.is_file():
        return []
    done: list[str] = []
    for raw in p.read_text(encoding="utf-8", errors="replace").splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        m = _LINE.match(raw)
        if not m:
            continue
        key, value = m.group(1), m.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if key not in os.environ:
            os.environ[key] = value
            done.append(key)
    return done


def _list(name: str) -> list[str]:
    return [x.strip() for x in os.environ.get(name, "").split(",") if x.strip()]


def _int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw[:40]!r}") from None


@dataclass
class Settings:
    slack_bot_token: str | None = None
    slack_app_token: str | None = None
    slack_signing_secret: str | None = None
    slack_api_url: str | None = None  # None: Slack's own
    database_url: str | None = None  # None: kb.db default (SQLite in the user's data folder)
    log_root: str = "./jobs"  # local path or fsspec URL
    job_id_pattern: str = DEFAULT_JOB_ID_PATTERN
    report_hosts: list[str] = field(default_factory=list)  # hosts failure-report links may point to
    sre_users: list[str] = field(default_factory=list)  # Slack user IDs allowed to confirm
    sre_usergroup: str | None = None  # or a Slack user group ID (S…) whose members may confirm
    workers: int = 2  # concurrent analyses in the bot
    digest_channel: str | None = None
    digest_cron: str = DEFAULT_DIGEST_CRON

    @classmethod
    def from_env(cls) -> Settings:
        pattern = os.environ.get("L4_JOB_ID_PATTERN") or DEFAULT_JOB_ID_PATTERN
        try:
            re.compile(pattern)
        except re.error as e:
            raise ConfigError(f"L4_JOB_ID_PATTERN is not a valid regular expression: {e}") from None
        workers = _int("L4_WORKERS", 2)
        if workers < 1:
            raise ConfigError("L4_WORKERS must be at least 1")
        return cls(
            slack_bot_token=os.environ.get("SLACK_BOT_TOKEN") or None,
            slack_app_token=os.environ.get("SLACK_APP_TOKEN") or None,
            slack_signing_secret=os.environ.get("SLACK_SIGNING_SECRET") or None,
            slack_api_url=os.environ.get("SLACK_API_URL") or None,
            database_url=os.environ.get("L4_DATABASE_URL") or None,
            log_root=os.environ.get("L4_LOG_ROOT") or "./jobs",
            job_id_pattern=pattern,
            report_hosts=[h.lower() for h in _list("L4_REPORT_HOSTS")],
            sre_users=_list("L4_SRE_USERS"),
            sre_usergroup=os.environ.get("L4_SRE_USERGROUP") or None,
            workers=workers,
            digest_channel=os.environ.get("L4_DIGEST_CHANNEL") or None,
            digest_cron=os.environ.get("L4_DIGEST_CRON") or DEFAULT_DIGEST_CRON,
        )
