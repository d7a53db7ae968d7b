"""The worker pool of the bot: a bounded queue, and a shutdown that tells the queued askers."""
from __future__ import annotations

import threading
from pathlib import Path

from bot.config import Settings
from bot.slack.client import make_web_client
from bot.slack.diagnoser import Accepted, Busy, Diagnoser
from bot.triage import triage
from tests.helpers.fake_slack import FakeSlack


def test_busy_queue_turns_askers_away_and_shutdown_tells_the_queued(tmp_path: Path, log_root: Path):
    gate = threading.Event()

    def slow(req, **kw):
        assert gate.wait(30)
        return triage(req, **kw)

    with FakeSlack() as slack:
        settings = Settings(slack_bot_token="xoxb-test", slack_api_url=slack.api_url, workers=1,
                            database_url=f"sqlite:///{tmp_path / 'kb.db'}", log_root=str(log_root))
        diagnoser = Diagnoser(settings, make_web_client(settings), run_triage=slow, max_queued=2)
        running = diagnoser.request("job-0001", "C1", "1.1")
        queued = diagnoser.request("job-0002", "C1", "2.2")
        turned_away = diagnoser.request("job-0003", "C1", "3.3")
        assert isinstance(running, Accepted) and isinstance(queued, Accepted)
        assert isinstance(turned_away, Busy)
        busy = slack.wait_for_call("chat.postMessage", where=lambda c: "busy" in str(c.params))[0]
        assert busy.params["thread_ts"] == "3.3" and not diagnoser.inflight.running().get("job-0003")

        diagnoser.shutdown(wait=False)
        told = slack.wait_for_call("chat.update", where=lambda c: "bot stopped" in str(c.params))
        assert [c.params["ts"] for c in told] == [queued.message_ts]
        gate.set()
        diagnoser.pool.shutdown(wait=True)
        summary = slack.wait_for_call("chat.update", where=lambda c: "Confirm" in str(c.params))
        assert summary[0].params["ts"] == running.message_ts  # the running analysis still finished
