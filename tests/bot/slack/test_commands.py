"""The /l4 slash command over signed HTTP requests: diagnose, patterns, digest, help, unknown."""
from __future__ import annotations

from pathlib import Path

from tests.helpers.slack_bot import SECRET, BotHarness
from tests.helpers.slack_requests import post_signed, slash_command
from tests.helpers.wait import WAIT

DEV = "UDEV0001"


def _command(bot: BotHarness, text: str, channel: str = "C1"):
    body = slash_command(text, user=DEV, channel=channel, response_url=bot.slack.response_url())
    return post_signed(bot.url, SECRET, body, "command")


def test_diagnose_help_patterns_and_unknown(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root) as bot:
        r = _command(bot, "diagnose job-0001")
        assert r.status == 200 and "Diagnosing *job-0001*" in r.text
        parent = bot.wait_post_containing("asked me to diagnose")
        assert f"<@{DEV}>" in parent.params["text"] and not parent.params.get("thread_ts")
        summary = bot.wait_summary("job-0001")
        assert bot.thread_of(summary) == bot.slack.messages_by_text("asked me to diagnose")[0]["ts"]

        assert "neither a job ID" in _command(bot, "diagnose /etc").text
        assert "neither a job ID" in _command(bot, "diagnose <https://evil.example/x|x>").text
        assert "Usage" in _command(bot, "diagnose").text

        help_text = _command(bot, "help").text
        assert "/l4 diagnose <job>" in help_text and "/l4 patterns" in help_text
        assert _command(bot, "").text == help_text
        patterns = _command(bot, "patterns").text
        assert "fault patterns" in patterns and "`hardware/accelerator`" in patterns
        assert "Unknown command `frobnicate`" in _command(bot, "frobnicate").text


def test_diagnose_in_a_channel_the_bot_is_not_in(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root) as bot:
        bot.slack.fail_next("chat.postMessage", status=200, error="not_in_channel", retry_after=None)
        assert _command(bot, "diagnose job-0001", channel="CNOPE").status == 200
        (said,) = bot.slack.wait_for_call("response_url")
        assert "not_in_channel" in said.params["text"] and "/invite" in said.params["text"]
        assert bot.services.diagnoser.wait_idle(WAIT)
        assert not bot.services.diagnoser.inflight.running()


def test_digest_is_posted_in_the_channel_with_its_plot(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root) as bot:
        assert "from 1 to 365" in _command(bot, "digest 0").text
        r = _command(bot, "diagnose job-0001")
        assert r.status == 200
        bot.wait_summary("job-0001")  # one diagnosis in the knowledge base
        r = _command(bot, "digest 3")
        assert r.status == 200 and "last 3 days" in r.text
        digest = bot.wait_post_containing("L4 digest")
        assert digest.params["channel"] == "C1" and not digest.params.get("thread_ts")
        assert "/l4 digest [days]" in _command(bot, "help").text
