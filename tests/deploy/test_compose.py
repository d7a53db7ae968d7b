"""deploy/compose.yaml: PostgreSQL 16 with a named volume, the migrations once before the bot, the
log root read-only, secrets from an env file, health checks, and Dask behind a profile."""
from __future__ import annotations

from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())  # anchors and << merges resolved


def test_postgres_then_migrations_then_the_bot() -> None:
    c = _compose()
    services, volumes = c["services"], c["volumes"]
    pg = services["postgres"]
    assert pg["image"].startswith("postgres:16")
    (data,) = pg["volumes"]
    assert data.split(":")[0] in volumes and data.split(":")[1] == "/var/lib/postgresql/data"
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])
    migrate, bot = services["migrate"], services["bot"]
    assert migrate["entrypoint"] + migrate["command"] == ["l4", "db", "upgrade"]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert bot["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "/healthz" in " ".join(bot["healthcheck"]["test"])
    for svc in (migrate, bot):
        assert svc["env_file"] == ["l4.env"] and "SLACK_BOT_TOKEN" not in str(svc.get("environment"))
        assert svc["environment"]["L4_DATABASE_URL"].startswith("postgresql+psycopg://")
        (logs,) = svc["volumes"]
        assert logs.endswith(":" + svc["environment"]["L4_LOG_ROOT"] + ":ro")
    assert int(bot["stop_grace_period"].rstrip("s")) > 25  # above L4_DRAIN_SECONDS' default


def test_dask_behind_a_profile_on_the_same_image_and_logs() -> None:
    services = _compose()["services"]
    assert not services["bot"].get("profiles")
    for name in ("dask-scheduler", "dask-worker"):
        svc = services[name]
        assert svc["profiles"] == ["dask"] and svc["image"] == services["bot"]["image"]
        assert svc["entrypoint"][0] == "dask"
    assert services["dask-worker"]["volumes"] == services["bot"]["volumes"]
    assert "tcp://dask-scheduler:8786" in services["dask-worker"]["entrypoint"]
