"""A failure-report link pasted in Slack: fetched through the guarded fetcher from a real HTTP server
on 127.0.0.1 (allowlisted here), its gzip logs downloaded with progress in the thread, and the
report's description in the summary."""
from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.http_server import HttpServer
from tests.helpers.jobs import publish_gz
from tests.helpers.slack_bot import BotHarness
from tests.helpers.slack_requests import message_event
from tests.helpers.wait import WAIT

DEV = "UDEV0001"
REPORT = {"job_id": "job-0042", "description": "Stopped at iteration 20 <!here>: ECC error on node-002",
          "settings": {"model": "toy"}, "log_url": "/logs/job-0042/"}


def test_a_report_link_is_fetched_and_diagnosed_in_the_thread(tmp_path: Path, log_root: Path):
    publish_gz(tmp_path / "www")
    with HttpServer(folder=tmp_path / "www") as srv:
        srv.route("/reports/42", body=json.dumps(REPORT).encode(), content_type="application/json")
        with BotHarness(tmp_path, log_root=log_root, report_hosts=["127.0.0.1"],
                        cache_dir=str(tmp_path / "cache"), fetch_timeout=2.0) as bot:
            link = srv.url("/reports/42")
            bot.event(message_event("C1", DEV, f"our run died: <{link}|report 42>"))
            summary = bot.wait_summary("job-0042")
            text = json.dumps(summary.params)
            assert "Stopped at iteration 20" in text and "<!here>" not in text  # escaped, pings no one
            assert "node-002" in text
            updates = bot.slack.calls_to("chat.update")
            fetching = [c for c in updates if "downloading the logs" in str(c.params)]
            assert fetching and " MB" in str(fetching[-1].params)
            # the other host is not a report host: nothing starts
            bot.event(message_event("C1", DEV, "see <https://evil.example/reports/42>"))
            assert bot.services.diagnoser.wait_idle(WAIT)
            assert sum("asked" in str(c.params) or "Diagnosing" in str(c.params)
                       for c in bot.slack.calls_to("chat.postMessage")) == 1
