"""The shared fake Slack Web API answers a real slack_sdk WebClient like Slack does."""
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from tests.helpers.fake_slack import FakeSlack


def test_post_update_upload_and_rate_limit_retry() -> None:
    with FakeSlack(usergroups={"S1": ["U1"]}) as slack:
        client = WebClient(token="xoxb-test", base_url=slack.api_url)
        client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
        assert client.auth_test()["user_id"]
        slack.fail_next("chat.postMessage", retry_after=0)
        posted = client.chat_postMessage(channel="C1", text="hello <!channel>")
        assert [c.status for c in slack.calls_to("chat.postMessage")] == [429, 200]
        client.chat_update(channel="C1", ts=posted["ts"], text="done")
        assert slack.messages[("C1", posted["ts"])]["text"] == "done"
        up = client.files_upload_v2(channel="C1", thread_ts=posted["ts"], content="report body",
                                    filename="r.txt", title="Report")
        assert up["ok"]
        (f,) = slack.uploads.values()
        assert f.completed and f.content == b"report body" and f.thread_ts == posted["ts"]
        assert client.usergroups_users_list(usergroup="S1")["users"] == ["U1"]
        try:
            client.chat_update(channel="C1", ts="1.0", text="x")
        except SlackApiError as e:
            assert e.response["error"] == "message_not_found"
        else:
            raise AssertionError("expected an error")


def test_delays_matching_failures_and_threads() -> None:
    import time

    with FakeSlack() as slack:
        client = WebClient(token="xoxb-test", base_url=slack.api_url, timeout=1)
        parent = client.chat_postMessage(channel="C1", text="parent")["ts"]
        slack.delay_next("chat.postMessage", 5)
        started = time.monotonic()
        try:
            client.chat_postMessage(channel="C1", thread_ts=parent, text="late")
        except TimeoutError:
            pass
        else:
            raise AssertionError("expected the client to give up")
        assert time.monotonic() - started < 5  # it gave up (after its 1 s) before the answer came
        replies = client.conversations_replies(channel="C1", ts=parent)["messages"]
        assert [m["text"] for m in replies] == ["parent", "late"]  # it went through all the same
        slack.fail_matching("chat.update", lambda p: "secret" in str(p), status=200, error="msg_too_long",
                            times=1)
        try:
            client.chat_update(channel="C1", ts=parent, text="secret")
        except SlackApiError as e:
            assert e.response["error"] == "msg_too_long"
        client.chat_update(channel="C1", ts=parent, text="secret")  # once only
        assert [m["text"] for m in slack.thread("C1", parent)] == ["secret", "late"]
