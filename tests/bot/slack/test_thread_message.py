"""The bot's message in a thread: progress edits never fail the work, a post whose answer was lost is
found again, a second copy of it is settled, and the answer falls back to shorter forms."""
from __future__ import annotations

from slack_sdk import WebClient

from bot.slack.thread_message import ThreadMessage, error_forms
from tests.helpers.fake_slack import FakeSlack


def test_lost_answers_and_strays(tmp_path):
    with FakeSlack() as slack:
        client = WebClient(token="xoxb-test", base_url=slack.api_url, timeout=1)
        recorded: list[str] = []
        msg = ThreadMessage(client, "C1", "1.1", "job-0001", on_posted=recorded.append)
        slack.delay_next("chat.postMessage", 3)  # went through, answered after the client gave up
        ts = msg.post("queued")
        assert ts is not None and recorded == [ts] and len(slack.thread("C1", "1.1")) == 1
        slack.delay_next("chat.update", 3)
        msg.phase("parsing")  # a progress edit that times out is only logged
        slack.fail_next("chat.update", status=500, error="internal_error", retry_after=None)
        msg.phase("analyzing")
        # a stray second "Diagnosing…" (a post retried after a timeout) points to the answer
        client.chat_postMessage(channel="C1", thread_ts="1.1", text="Diagnosing job-0001…")
        slack.fail_next("chat.update", status=200, error="msg_too_long", retry_after=None)
        assert msg.final(error_forms("job-0001", "unknown job"))
        texts = [m["text"] for m in slack.thread("C1", "1.1")]
        assert texts[0].startswith("Could not diagnose job-0001") and "answer for job-0001" in texts[1]
        assert not any(t.startswith("Diagnosing") for t in texts)


def test_a_deleted_progress_message_gets_a_new_reply(tmp_path):
    with FakeSlack() as slack:
        client = WebClient(token="xoxb-test", base_url=slack.api_url)
        msg = ThreadMessage(client, "C1", "1.1", "job-0001", ts="999.1")  # not (or no longer) there
        assert msg.final(error_forms("job-0001", "unknown job"))
        assert [m["text"] for m in slack.thread("C1", "1.1")][0].startswith("Could not diagnose")
