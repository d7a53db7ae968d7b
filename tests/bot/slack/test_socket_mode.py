"""Socket Mode: events reach the same listeners through Bolt's SocketModeHandler."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.app import build_services, create_app
from bot.config import Settings
from bot.serve import socket_mode_handler
from bot.slack.client import make_web_client
from tests.helpers.fake_slack import FakeSlack
from tests.helpers.slack_requests import event_body, message_event, slash_command
from tests.helpers.wait import WAIT

DEV = "UDEV0001"


class _RecordingSocketClient:
    """What SocketModeHandler.handle needs of a client: a logger and a place to send the acks."""

    def __init__(self) -> None:
        self.logger = logging.getLogger("test.socket")
        self.responses: list[SocketModeResponse] = []

    def send_socket_mode_response(self, response: SocketModeResponse) -> None:
        self.responses.append(response)


def _settings(slack: FakeSlack, tmp_path: Path, log_root: Path) -> Settings:
    return Settings(slack_bot_token="xoxb-test", slack_app_token="xapp-test", slack_api_url=slack.api_url,
                    database_url=f"sqlite:///{tmp_path / 'kb.db'}", log_root=str(log_root))


def test_handler_dispatches_events_and_commands(tmp_path: Path, log_root: Path):
    with FakeSlack() as slack:
        settings = _settings(slack, tmp_path, log_root)
        services = build_services(settings, make_web_client(settings))
        handler = socket_mode_handler(create_app(settings, services=services), settings)
        sock = _RecordingSocketClient()
        try:
            ev = message_event("C9", DEV, "job-0002 broke")
            handler.handle(sock, SocketModeRequest(type="events_api", envelope_id="env-1",
                                                   payload=event_body(ev)))
            assert [r.envelope_id for r in sock.responses] == ["env-1"]
            slack.wait_for_call("chat.update", where=lambda c: "L4 diagnosis of job-0002" in str(c.params))
            assert slack.calls_to("chat.postMessage")[0].params["thread_ts"] == ev["ts"]

            cmd = slash_command("help", user=DEV, channel="C9", response_url=slack.response_url())
            handler.handle(sock, SocketModeRequest(type="slash_commands", envelope_id="env-2", payload=cmd))
            assert sock.responses[-1].envelope_id == "env-2"
            assert "/l4 diagnose" in json.dumps(sock.responses[-1].payload)
        finally:
            services.diagnoser.shutdown()
            services.knowledge.engine.dispose()


def test_l4_bot_over_a_real_websocket(tmp_path: Path, log_root: Path):
    """`l4 bot` in a subprocess connects to the fake's Socket Mode endpoint and answers an event."""
    with FakeSlack() as slack:
        env = {**os.environ, "SLACK_BOT_TOKEN": "xoxb-test", "SLACK_APP_TOKEN": "xapp-test",
               "SLACK_API_URL": slack.api_url, "L4_DATABASE_URL": f"sqlite:///{tmp_path / 'kb.db'}",
               "L4_LOG_ROOT": str(log_root)}
        env.pop("SLACK_SIGNING_SECRET", None)
        proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "bot"], env=env, cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            (conn,) = slack.wait_for_call("socket_mode.connect")
            assert conn.headers.get("upgrade", "").lower() == "websocket"
            assert slack.calls_to("apps.connections.open")[0].headers["Authorization"] == "Bearer xapp-test"
            ev = message_event("C7", DEV, "job-0001 died overnight")
            slack.socket_send({"envelope_id": "env-9", "type": "events_api",
                               "accepts_response_payload": False, "payload": event_body(ev)})
            slack.wait_for_call("socket_mode", where=lambda c: c.params.get("envelope_id") == "env-9")
            slack.wait_for_call("chat.update",
                                where=lambda c: "L4 diagnosis of job-0001" in str(c.params))
        finally:
            proc.terminate()
            try:
                _, err = proc.communicate(timeout=WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
        assert "Traceback" not in err.replace("KeyboardInterrupt", ""), err[-2000:]
        assert "xoxb-test" not in err and "xapp-test" not in err
