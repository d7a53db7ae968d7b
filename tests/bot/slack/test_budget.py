"""L4_ANALYSIS_TIMEOUT: an analysis that runs too long is killed in its child process, its thread
says so in one line, and the worker takes the next request; an analysis process that dies (killed
from outside) is tried again."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from tests.helpers.http_server import HttpServer
from tests.helpers.jobs import publish_gz
from tests.helpers.slack_bot import BotHarness, thread_answer
from tests.helpers.slack_requests import message_event
from tests.helpers.wait import WAIT

DEV = "UDEV0001"


def test_an_analysis_over_budget_is_stopped_and_the_next_one_runs(tmp_path: Path, log_root: Path):
    www = tmp_path / "www"
    publish_gz(www, "job-0042", nodes=2)
    with HttpServer(folder=www) as srv:
        for k in (1, 2):  # a report server that takes a minute to answer
            srv.route(f"/reports/{k}", body=json.dumps({"job_id": "job-0042", "log_url": "/logs/job-0042/"})
                      .encode(), content_type="application/json", delay=60)
        with BotHarness(tmp_path, log_root=log_root, report_hosts=["127.0.0.1"], workers=1,
                        analysis_timeout=2.0, fetch_timeout=120.0, cache_dir=str(tmp_path / "cache")) as bot:
            threads = [message_event("C1", DEV, f"died: <{srv.url(f'/reports/{k}')}|r>") for k in (1, 2)]
            for ev in threads:
                bot.event(ev)
            bot.slack.wait_for(lambda s: all(thread_answer(s, "C1", ev["ts"]) for ev in threads))
            for ev in threads:
                text = thread_answer(bot.slack, "C1", ev["ts"])["text"]
                assert "stopped after 2 s" in text and "l4 diagnose" in text and "\n" not in text
            assert bot.services.diagnoser.wait_idle(WAIT)
            assert len(srv.seen("/reports/")) == 2  # each was asked for once: no retry of a timed-out job


def test_an_analysis_process_that_dies_is_tried_again(tmp_path: Path, log_root: Path):
    www = tmp_path / "www"
    publish_gz(www, "job-0042", nodes=2)
    report = json.dumps({"job_id": "job-0042", "log_url": "/logs/job-0042/"}).encode()
    with HttpServer(folder=www) as srv:
        srv.route("/reports/1", body=report, content_type="application/json", delay=60)
        with BotHarness(tmp_path, log_root=log_root, report_hosts=["127.0.0.1"], fetch_timeout=120.0,
                        cache_dir=str(tmp_path / "cache")) as bot:
            ev = message_event("C1", DEV, f"died: <{srv.url('/reports/1')}|r>")
            bot.event(ev)
            bot.slack.wait_for(lambda s: len(srv.seen("/reports/")) == 1)
            runner = bot.services.diagnoser.runner
            (pid,) = runner.pids
            srv.route("/reports/1", body=report, content_type="application/json")
            os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer would
            summary = bot.wait_summary("job-0042")
            assert bot.thread_of(summary) == ev["ts"]
            retried = bot.wait_update_containing("the analysis process died")
            assert "SIGKILL" in str(retried.params) and "attempt 2 of 3" in str(retried.params)
