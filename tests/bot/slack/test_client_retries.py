"""Slack Web API calls through `make_web_client` against the fake Slack: server errors and 429s are
retried within a bounded count and time; past the bound the call fails loudly (logged and raised)."""
from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from slack_sdk.errors import SlackApiError

from bot.config import Settings
from bot.slack import client as slack_client
from bot.slack.client import make_web_client
from tests.helpers.fake_slack import FakeSlack
from tests.helpers.slack_bot import BotHarness
from tests.helpers.slack_requests import message_event


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        yield fake


def _client(slack: FakeSlack):
    return make_web_client(Settings(slack_bot_token="xoxb-test", slack_api_url=slack.api_url))


def _statuses(slack: FakeSlack, method: str = "chat.postMessage") -> list[int]:
    return [c.status for c in slack.calls_to(method)]


@pytest.mark.parametrize("status", [500, 503])
def test_one_server_error_is_retried(slack: FakeSlack, status: int) -> None:
    slack.fail_next("chat.postMessage", status=status, error="internal_error", retry_after=None)
    resp = _client(slack).chat_postMessage(channel="C1", text="hello")
    assert resp["ok"] and _statuses(slack) == [status, 200]
    assert len(slack.messages_by_text("hello")) == 1


def test_more_than_five_429s_are_waited_out(slack: FakeSlack) -> None:
    slack.fail_next("chat.postMessage", retry_after=0, times=6)
    assert _client(slack).chat_postMessage(channel="C1", text="patient")["ok"]
    assert _statuses(slack) == [429] * 6 + [200]


def test_past_the_retry_count_the_call_fails_loudly(slack: FakeSlack, caplog,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slack_client, "RATE_LIMIT_RETRIES", 2)
    slack.fail_next("chat.postMessage", retry_after=0, times=5)
    with caplog.at_level(logging.WARNING, logger="l4.slack"), pytest.raises(SlackApiError) as err:
        _client(slack).chat_postMessage(channel="C1", text="never")
    assert err.value.response["error"] == "ratelimited" and _statuses(slack) == [429] * 3
    (line,) = [r.getMessage() for r in caplog.records]
    assert "chat.postMessage rate-limited the call (429) 3 time(s)" in line and "giving up" in line


def test_a_retry_after_past_the_time_bound_is_not_waited_for(slack: FakeSlack, caplog) -> None:
    slack.fail_next("chat.postMessage", retry_after=int(slack_client.RETRY_SECONDS) + 60)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="l4.slack"), pytest.raises(SlackApiError):
        _client(slack).chat_postMessage(channel="C1", text="later")
    assert time.monotonic() - started < slack_client.RETRY_SECONDS and _statuses(slack) == [429]  # not waited
    assert any("giving up" in r.getMessage() for r in caplog.records)


def test_server_errors_stop_after_their_count(slack: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slack_client, "SERVER_ERROR_RETRIES", 1)
    slack.fail_next("chat.update", status=502, error="bad_gateway", retry_after=None, times=10)
    with pytest.raises(SlackApiError):
        _client(slack).chat_update(channel="C1", ts="1.1", text="x")
    assert _statuses(slack, "chat.update") == [502, 502]


def test_the_bot_survives_one_500_on_its_first_post(tmp_path: Path, log_root: Path) -> None:
    with BotHarness(tmp_path, log_root=log_root) as bot:
        bot.slack.fail_next("chat.postMessage", status=500, error="internal_error", retry_after=None)
        asked = message_event("C1", "UDEV0001", "job-0001 died")
        assert bot.event(asked).status == 200
        summary = bot.wait_summary("job-0001")
        assert bot.thread_of(summary) == asked["ts"]
        assert _statuses(bot.slack)[:2] == [500, 200]
