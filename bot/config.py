"""The bot's and CLI's configuration: environment variables, and `.env` in the working folder.

Every variable is documented in `.env.example`. `load_dotenv()` runs once at CLI start; values
already in the environment win over `.env`. `Settings.from_env()` reads a snapshot.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

# "job-" and a name with at least one digit: job-0042, job-a1b2 (not "job-related")
DEFAULT_JOB_ID_PATTERN = r"job-(?=[A-Za-z0-9._-]*[0-9])[A-Za-z0-9][A-Za-z0-9._-]*"
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


def _positive(name: str, default: float, kind: type = int) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw[:40]!r}") from None
    if value <= 0:
        raise ConfigError(f"{name} must be greater than 0")
    return value


def _port(name: str) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    value = _int(name, 0)
    if not 0 <= value < 65536:
        raise ConfigError(f"{name} must be a port between 0 and 65535, got {value}")
    return value


def _choice(name: str, allowed: tuple[str, ...]) -> str | None:
    value = (os.environ.get(name) or "").strip().lower()
    if value and value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)} or unset, not {value!r}")
    return value or None


def _pem_file(name: str) -> str | None:
    """The path in `name` (``~`` expanded), if it is a readable file with PEM certificates; None when
    unset. (The TLS context parses the certificates themselves: bot.sources.tls.)"""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    path = Path(raw).expanduser()
    if not path.is_file():
        raise ConfigError(f"{name}: no such file: {raw[:120]}")
    try:
        text = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{name}: cannot read {raw[:120]}: {e.strerror or 'unreadable'}") from None
    if b"-----BEGIN CERTIFICATE-----" not in text:
        raise ConfigError(f"{name}: no PEM certificates in {raw[:120]}")
    return str(path)


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
    analysis_timeout: float = 600.0  # seconds one bot analysis may take before it is stopped
    drain_seconds: float = 25.0  # on SIGTERM/Ctrl-C, seconds running analyses get to finish
    lease_seconds: float = 120.0  # a bot holds its requests this long, renewed; then others take over
    health_port: int | None = None  # Socket Mode: /healthz and /metrics port (HTTP: --port)
    slack_timeout: float = 30.0  # seconds the bot waits for one Slack Web API answer
    digest_channel: str | None = None
    digest_cron: str = DEFAULT_DIGEST_CRON
    # failure-report links and remote logs (bot/sources)
    report_rules: str | None = None  # YAML of report URL rules and field names; None: bundled default
    report_networks: list[str] = field(default_factory=list)  # non-public networks allowlisted hosts may use
    fetch_timeout: float = 20.0  # seconds to connect / between received bytes
    fetch_time_limit: float = 900.0  # seconds for resolving one job (report + all its files)
    fetch_max_bytes: int = 10 * 2**30  # bytes of logs per job, after decompression
    max_decompress_ratio: int = 200  # a .gz/.zst file may expand at most this many times
    cache_dir: str | None = None  # None: ~/.cache/l4 (remote jobs go in <cache_dir>/remote-jobs)
    cache_max_bytes: int = 20 * 2**30  # size cap of the remote-job cache
    fetch_ca_bundle: str | None = None  # PEM file of CAs trusted for https fetches besides certifi's
    # a Dask cluster for scanning rank files (`tcp://host:8786`); None: this machine's executors
    dask_scheduler: str | None = None
    dask_fallback: str | None = None  # "local": use this machine when the cluster cannot be used
    dask_connect_timeout: float = 10.0  # seconds to reach the scheduler
    dask_max_analyses: int = 16  # with a scheduler: the bot's analyses in flight on the cluster at once

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
            analysis_timeout=_positive("L4_ANALYSIS_TIMEOUT", 600.0, float),
            drain_seconds=_positive("L4_DRAIN_SECONDS", 25.0, float),
            lease_seconds=_positive("L4_LEASE_SECONDS", 120.0, float),
            health_port=_port("L4_HEALTH_PORT"),
            slack_timeout=_positive("L4_SLACK_TIMEOUT", 30.0, float),
            digest_channel=os.environ.get("L4_DIGEST_CHANNEL") or None,
            digest_cron=os.environ.get("L4_DIGEST_CRON") or DEFAULT_DIGEST_CRON,
            report_rules=os.environ.get("L4_REPORT_RULES") or None,
            report_networks=_list("L4_REPORT_NETWORKS"),
            fetch_timeout=_positive("L4_FETCH_TIMEOUT", 20.0, float),
            fetch_time_limit=_positive("L4_FETCH_TIME_LIMIT", 900.0, float),
            fetch_max_bytes=int(_positive("L4_FETCH_MAX_BYTES", 10 * 2**30)),
            max_decompress_ratio=int(_positive("L4_MAX_DECOMPRESS_RATIO", 200)),
            cache_dir=os.environ.get("L4_CACHE_DIR") or None,
            cache_max_bytes=int(_positive("L4_CACHE_MAX_BYTES", 20 * 2**30)),
            fetch_ca_bundle=_pem_file("L4_FETCH_CA_BUNDLE"),
            dask_scheduler=os.environ.get("L4_DASK_SCHEDULER") or None,
            dask_fallback=_choice("L4_DASK_FALLBACK", ("local",)),
            dask_connect_timeout=_positive("L4_DASK_CONNECT_TIMEOUT", 10.0, float),
            dask_max_analyses=int(_positive("L4_DASK_MAX_ANALYSES", 16)),
        )
