"""A real L4 bot for tests: the Bolt app over HTTP on 127.0.0.1, talking to the shared FakeSlack.

    with BotHarness(tmp_path, log_root=jobs) as bot:
        bot.event(message_event("C1", "U1", "job-0042 failed"))
        summary = bot.wait_summary("job-0042")

The job ID → folder resolution reads ``L4_LOG_ROOT`` from the environment: set it (monkeypatch)
to the same folder as ``log_root``.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from bot.app import BotServices, build_services, create_app
from bot.config import Settings
from bot.serve import http_server
from bot.slack.client import make_web_client
from bot.triage import triage
from tests.helpers.fake_slack import Call, FakeSlack
from tests.helpers.slack_requests import Reply, block_action, event_body, post_signed, view_submission

SECRET = "test-signing-secret"


class BotHarness:
    def __init__(self, tmp_path: Path, *, log_root: Path, run_triage: Any = triage,
                 usergroups: dict[str, list[str]] | None = None, **settings: Any) -> None:
        self.slack = FakeSlack(usergroups=usergroups)
        self.tmp_path = tmp_path
        self.log_root = log_root
        self.run_triage = run_triage
        self.overrides = settings
        self.services: BotServices | None = None

    def __enter__(self) -> BotHarness:
        self.slack.start()
        self.settings = Settings(slack_bot_token="xoxb-test", slack_signing_secret=SECRET,
                                 slack_api_url=self.slack.api_url,
                                 database_url=f"sqlite:///{self.tmp_path / 'kb.db'}",
                                 log_root=str(self.log_root), **self.overrides)
        client = make_web_client(self.settings)
        self.services = build_services(self.settings, client, run_triage=self.run_triage)
        self.app = create_app(self.settings, services=self.services)
        self.server = http_server(self.app, "127.0.0.1", 0)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        host, port = self.server.server_address[:2]
        self.url = f"http://{host}:{port}/slack/events"
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self.services is not None:
            self.services.diagnoser.shutdown(wait=True)
            self.services.knowledge.engine.dispose()
        self.slack.stop()

    # -- requests ----------------------------------------------------------------------------------
    def event(self, event: dict[str, Any]) -> Reply:
        return post_signed(self.url, SECRET, event_body(event), "event")

    def interact(self, payload: dict[str, Any]) -> Reply:
        return post_signed(self.url, SECRET, payload, "interactive")

    def click(self, action_id: str, summary: Call, user: str) -> Reply:
        """Click a button of the summary message ``summary`` (a chat.update call) as ``user``."""
        button = next(e for b in summary.params["blocks"] if b["type"] == "actions"
                      for e in b["elements"] if e["action_id"] == action_id)
        thread = self.thread_of(summary)
        return self.interact(block_action(action_id, button["value"], user=user,
                                          channel=summary.params["channel"], message_ts=summary.params["ts"],
                                          thread_ts=thread))

    def submit(self, view: dict[str, Any], user: str, values: dict[str, dict[str, Any]]) -> Reply:
        return self.interact(view_submission(view, user, values))

    # -- what the bot did --------------------------------------------------------------------------
    def thread_of(self, update: Call) -> str | None:
        msg = self.slack.messages.get((str(update.params["channel"]), str(update.params["ts"])))
        return msg.get("thread_ts") if msg else None

    def wait_summary(self, job: str, timeout: float = 60.0) -> Call:
        """The chat.update that put the final summary (with buttons) of ``job`` in its thread."""
        def is_summary(c: Call) -> bool:
            blocks = c.params.get("blocks") or []
            return (any(b.get("type") == "actions" for b in blocks)
                    and f"L4 diagnosis of {job}" in str(blocks[0].get("text", {}).get("text")))
        return self.slack.wait_for_call("chat.update", where=is_summary, timeout=timeout)[-1]

    def wait_update_containing(self, needle: str, timeout: float = 60.0) -> Call:
        return self.slack.wait_for_call("chat.update", timeout=timeout,
                                        where=lambda c: needle in str(c.params))[-1]

    def wait_post_containing(self, needle: str, timeout: float = 30.0) -> Call:
        return self.slack.wait_for_call("chat.postMessage", timeout=timeout,
                                        where=lambda c: needle in str(c.params))[-1]
