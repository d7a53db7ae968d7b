"""/healthz and /metrics over real HTTP: the checks themselves (a real SQLite file, a database that is
not there, the fake Slack refusing auth.test), then the real ``l4 bot`` in HTTP mode (on its own
port) and in Socket Mode (on L4_HEALTH_PORT)."""
from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

from bot.config import Settings
from bot.health import Health, SlackProbe, health_server, serve_in_background
from bot.slack.client import make_web_client
from kb.db import make_engine, open_db
from tests.bot.slack.conftest import fault_job
from tests.helpers.fake_slack import FakeSlack
from tests.helpers.slack_bot import BotProcess, answer_id
from tests.helpers.slack_requests import message_event
from tests.helpers.wait import WAIT, wait_for

DRAIN = str(int(WAIT))  # L4_DRAIN_SECONDS of these bots: an idle one must not wait it out on SIGTERM
IDLE_STOP = WAIT / 2  # seconds: an idle bot exits on SIGTERM well within its L4_DRAIN_SECONDS


def _get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(health: Health) -> tuple[str, object]:
    server = health_server(health, "127.0.0.1", 0)
    serve_in_background(server)
    host, port = server.server_address[:2]
    return f"http://{host}:{port}", server


def test_healthz_says_what_is_wrong(tmp_path: Path) -> None:
    engine = open_db(f"sqlite:///{tmp_path / 'kb.db'}", load_library=False)
    dead_pg = make_engine(f"postgresql+psycopg://l4@127.0.0.1:{_free_port()}/nowhere")
    with FakeSlack() as slack:
        client = make_web_client(Settings(slack_bot_token="xoxb-test", slack_api_url=slack.api_url))
        probe = SlackProbe(client, every=0)
        url, server = _serve(Health(engine, probe, lambda: 3))
        try:
            status, ctype, body = _get(url + "/healthz")
            assert status == 200 and ctype == "application/json"
            assert json.loads(body) == {"database": "ok", "slack": "connected", "queue_depth": 3,
                                        "status": "ok"}
            slack.fail_next("auth.test", status=200, error="invalid_auth", retry_after=None)
            status, _, body = _get(url + "/healthz")
            assert status == 503 and json.loads(body)["slack"] == "disconnected"
            status, ctype, body = _get(url + "/metrics")
            assert status == 200 and ctype.startswith("text/plain")
            assert "# TYPE l4_queue_depth gauge" in body and "l4_requests_total" in body
            assert _get(url + "/slack/events")[0] == 404  # this server has nothing else
        finally:
            server.shutdown()
            server.server_close()
        url, server = _serve(Health(dead_pg, probe, lambda: 0, timeout=10))
        try:
            status, _, body = _get(url + "/healthz")
            report = json.loads(body)
            assert status == 503 and report["database"] == "unreachable" and report["status"] == "unhealthy"
            assert "\n" not in report["database_error"]
        finally:
            server.shutdown()
            server.server_close()
    engine.dispose()
    dead_pg.dispose()


def test_the_bot_serves_health_and_metrics_in_both_modes(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    fault_job(jobs / "job-0001", fault_node=1)
    with FakeSlack() as slack:
        bot = BotProcess(slack, tmp_path, log_root=jobs, L4_DRAIN_SECONDS=DRAIN)
        bot.start()
        try:
            base = bot.url.rsplit("/slack/events", 1)[0]
            status, _, body = _get(base + "/healthz")
            assert status == 200 and json.loads(body)["slack"] == "connected", body
            ts = bot.event(message_event("C1", "UDEV0001", "job-0001 failed"))["event"]["ts"]
            slack.wait_for(lambda s: answer_id(s, "C1", ts) is not None)
            metrics = _get(base + "/metrics")[2]
            assert 'l4_requests_total{decision="accepted"} 1.0' in metrics
            assert 'l4_analyses_total{outcome="stored"} 1.0' in metrics
            assert "l4_analysis_seconds_count 1.0" in metrics
            # finished once its plots are uploaded too
            wait_for(lambda: "l4_queue_depth 0.0" in _get(base + "/metrics")[2], what="queue depth 0")
            code, took = bot.terminate()
            assert code == 0 and took < IDLE_STOP, took  # idle: nothing to drain
        finally:
            bot.stop()

        port = _free_port()
        sock = BotProcess(slack, tmp_path, log_root=jobs, mode="socket", L4_HEALTH_PORT=str(port),
                          L4_DRAIN_SECONDS=DRAIN)
        sock.start()
        try:
            status, _, body = _get(f"http://127.0.0.1:{port}/healthz")
            assert status == 200 and json.loads(body) == {"database": "ok", "slack": "connected",
                                                          "queue_depth": 0, "status": "ok"}
            code, took = sock.terminate()
            assert code == 0 and took < IDLE_STOP, took
        finally:
            sock.stop()
        assert "Traceback" not in sock.stderr(), sock.stderr()[-3000:]
