"""A real L4 bot for tests: the Bolt app over HTTP on 127.0.0.1, talking to the shared FakeSlack.

    with BotHarness(tmp_path, log_root=jobs) as bot:
        bot.event(message_event("C1", "U1", "job-0042 failed"))
        summary = bot.wait_summary("job-0042")

The job ID → folder resolution reads ``L4_LOG_ROOT`` from the environment: set it (monkeypatch)
to the same folder as ``log_root``.

``BotProcess`` runs the real ``l4 bot`` command instead (a subprocess, HTTP or Socket Mode), to be
killed, stopped with SIGTERM and started again on the same knowledge base:

    bot = BotProcess(slack, tmp_path, log_root=jobs, mode="socket", L4_WORKERS="5").start()
    bot.event(message_event("C1", "U1", "job-0042 failed"))
    bot.kill()
    bot.start()
    answer_id(slack, "C1", thread_ts)   # the diagnosis ID of the thread's answer
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bot.app import BotServices, build_services, create_app
from bot.config import Settings
from bot.serve import http_server
from bot.slack.client import make_web_client
from tests.helpers.fake_slack import Call, FakeSlack
from tests.helpers.slack_requests import Reply, block_action, event_body, post_signed, view_submission
from tests.helpers.wait import WAIT

REPO = Path(__file__).resolve().parents[2]

SECRET = "test-signing-secret"


class BotHarness:
    def __init__(self, tmp_path: Path, *, log_root: Path, run_triage: Any = None,
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

    def wait_summary(self, job: str, timeout: float = WAIT) -> Call:
        """The chat.update that put the final summary (with buttons) of ``job`` in its thread."""
        def is_summary(c: Call) -> bool:
            blocks = c.params.get("blocks") or []
            return (any(b.get("type") == "actions" for b in blocks)
                    and f"L4 diagnosis of {job}" in str(blocks[0].get("text", {}).get("text")))
        return self.slack.wait_for_call("chat.update", where=is_summary, timeout=timeout)[-1]

    def wait_update_containing(self, needle: str, timeout: float = WAIT) -> Call:
        return self.slack.wait_for_call("chat.update", timeout=timeout,
                                        where=lambda c: needle in str(c.params))[-1]

    def wait_post_containing(self, needle: str, timeout: float = WAIT) -> Call:
        return self.slack.wait_for_call("chat.postMessage", timeout=timeout,
                                        where=lambda c: needle in str(c.params))[-1]


class BotProcess:
    """``l4 bot`` (``mode`` "http" or "socket") as a subprocess against ``slack``; ``env`` adds or
    overrides variables (L4_WORKERS, L4_ANALYSIS_TIMEOUT, ...). Its stderr goes to ``log``."""

    def __init__(self, slack: FakeSlack, tmp_path: Path, *, log_root: Path, mode: str = "http",
                 **env: str) -> None:
        self.slack, self.tmp_path, self.mode = slack, tmp_path, mode
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "L4_"))}
        self.env.update({"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_API_URL": slack.api_url,
                         "L4_DATABASE_URL": f"sqlite:///{tmp_path / 'kb.db'}", "L4_LOG_ROOT": str(log_root),
                         "L4_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)})
        if mode == "http":
            self.env["SLACK_SIGNING_SECRET"] = SECRET
        else:
            self.env["SLACK_APP_TOKEN"] = "xapp-test"
        self.env.update(env)
        self.log = tmp_path / "bot-stderr.log"
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self, timeout: float = WAIT) -> BotProcess:
        args = [sys.executable, "-m", "bot.cli", "bot"]
        args += ["--http", "--port", "0"] if self.mode == "http" else []
        connects = len(self.slack.calls_to("socket_mode.connect"))
        with self.log.open("a") as err:
            err.write(f"--- start ({self.mode})\n")
            err.flush()
            self.proc = subprocess.Popen(args, env=self.env, cwd=self.tmp_path, stdout=subprocess.DEVNULL,
                                         stderr=err)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"l4 bot exited with {self.proc.returncode}: {self.stderr()[-2000:]}")
            if self.mode == "http":
                m = re.findall(r"http://127\.0\.0\.1:(\d+)/slack/events", self.stderr())
                if m:
                    self.url = f"http://127.0.0.1:{m[-1]}/slack/events"
                    return self
            elif len(self.slack.calls_to("socket_mode.connect")) > connects:
                return self
            time.sleep(0.05)
        raise TimeoutError(f"l4 bot did not start in {timeout}s: {self.stderr()[-2000:]}")

    def stderr(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def deliver(self, body: dict[str, Any], retry: int = 0) -> None:
        """Deliver an Events API body as Slack does (``retry``: the how-manieth redelivery)."""
        if self.mode == "http":
            headers = {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
            headers = headers if retry else {}
            assert post_signed(self.url, SECRET, body, "event", headers=headers).status == 200
            return
        envelope: dict[str, Any] = {"envelope_id": f"env-{body.get('event_id')}-{retry}",
                                    "type": "events_api", "accepts_response_payload": False, "payload": body}
        if retry:
            envelope.update(retry_attempt=retry, retry_reason="timeout")
        self.slack.socket_send(envelope)

    def event(self, event: dict[str, Any]) -> dict[str, Any]:
        body = event_body(event)
        self.deliver(body)
        return body

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(WAIT)

    def terminate(self, timeout: float = WAIT) -> tuple[int, float]:
        """SIGTERM; the exit code and the seconds it took to exit."""
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        return code, time.monotonic() - started

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(WAIT)


ANSWER_ID = re.compile(r"diagnosis #(\d+)")


def thread_answer(slack: FakeSlack, channel: str, thread_ts: str) -> dict[str, Any] | None:
    """The bot's final message in a thread: its last one, unless that still says "Diagnosing…"."""
    mine = [m for m in slack.thread(channel, thread_ts) if m.get("bot_id") and m["ts"] != thread_ts]
    if not mine or str(mine[-1].get("text", "")).startswith("Diagnosing"):
        return None
    return mine[-1]


def answer_id(slack: FakeSlack, channel: str, thread_ts: str) -> int | None:
    """The diagnosis ID the thread's answer carries (with the buttons), None when there is none."""
    answer = thread_answer(slack, channel, thread_ts)
    if answer is None:
        return None
    found = ANSWER_ID.search(str(answer.get("blocks")) + str(answer.get("text")))
    return int(found.group(1)) if found and "l4_confirm" in str(answer.get("blocks")) else None
