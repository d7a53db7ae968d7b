"""The bot with a Dask cluster (L4_DASK_SCHEDULER): real signed Slack requests against the Bolt app,
the fake Slack Web API, and a real LocalCluster of worker processes. Whole analyses go to the
cluster, so ten requests at once are all in flight together; the budget cancels the future; a
cluster that is gone ends in one line (the request stays queued) or falls back to this machine."""
from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from distributed.core import Status  # noqa: E402

from kb.models import BotRequest, DiagnosisRecord  # noqa: E402
from tests.bot.slack.conftest import FAULT  # noqa: E402
from tests.bot.test_bot_faults import _rows  # noqa: E402
from tests.helpers.jobs import make_job  # noqa: E402
from tests.helpers.slack_bot import BotHarness, thread_answer  # noqa: E402
from tests.helpers.slack_requests import message_event  # noqa: E402
from tests.helpers.wait import WAIT, wait_for  # noqa: E402

DEV = "UDEV0001"
JOBS = 10
UNREACHABLE = "tcp://127.0.0.1:9"  # the discard port: nothing listens there
PRELOAD = ["engine.executor_dask"]  # the workers import the engine at start (deploy/README.md)


def _job(root: Path, k: int) -> Path:
    fault = k % 3
    return make_job(root / f"job-{k:04d}", nodes=3, ranks_per_node=2, iterations=40, fault_node=fault,
                    fault_at=30, fault_lines=(FAULT.format(r=fault * 2),))


@pytest.fixture
def log_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "jobs"
    for k in range(1, JOBS + 1):
        _job(root, k)
    monkeypatch.setenv("L4_LOG_ROOT", str(root))
    monkeypatch.delenv("L4_DATABASE_URL", raising=False)
    return root


@pytest.fixture(scope="module")
def cluster():
    # a free port for the scheduler's HTTP server (None still binds 8787, which parallel runs share)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=5, processes=True,
                                  dashboard_address="127.0.0.1:0", host="127.0.0.1",
                                  silence_logs=logging.ERROR, preload=PRELOAD) as c:
        yield c


@pytest.fixture
def client(cluster):
    with distributed.Client(cluster, set_as_default=False) as c:
        yield c
        _set_status(c, Status.running)


def _set_status(client, status: Status) -> None:
    """Pause or resume every worker (the scheduler gives a paused worker no task)."""
    def set_it(dask_worker, status=status):
        dask_worker.status = status
    client.run(set_it)


def _busy_threads(dask_scheduler) -> int:
    return sum(len(ws.processing) for ws in dask_scheduler.workers.values())


def _analyses_on_scheduler(client) -> int:
    def count(dask_scheduler):
        return sum(str(k).startswith("l4-analysis-") for k in dask_scheduler.tasks)
    return client.run_on_scheduler(count)


def _most_at_once(spans: list[dict], start: str, end: str) -> int:
    """The most spans [start, end) open at one time."""
    edges = sorted([(s[start], 1) for s in spans] + [(s[end], -1) for s in spans], key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def _summaries(bot: BotHarness, channel: str) -> list:
    return [c for c in bot.slack.calls_to("chat.update") if c.params.get("channel") == channel
            and "l4_confirm" in str(c.params.get("blocks"))]


def test_ten_requests_at_once_are_all_in_flight_on_the_cluster(cluster, client, log_root, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="l4.cluster")
    with BotHarness(tmp_path, log_root=log_root, dask_scheduler=cluster.scheduler_address,
                    dask_max_analyses=JOBS, analysis_timeout=WAIT) as bot:
        # the workers take no task until all ten requests were sent: the bot submitting them at once
        # is what is measured, not how fast the requests arrive
        _set_status(client, Status.paused)
        threads = {}
        for k in range(1, JOBS + 1):
            ev = message_event(f"C{k:02d}", DEV, f"job-{k:04d} failed")
            assert bot.event(ev).status == 200
            threads[f"C{k:02d}"] = ev["ts"]
        wait_for(lambda: _analyses_on_scheduler(client) == JOBS, what="ten analyses on the scheduler")
        _set_status(client, Status.running)
        wait_for(lambda: all(_summaries(bot, ch) for ch in threads), what="ten summaries")
        time.sleep(0.3)  # an answer posted twice would show now
        for ch, ts in threads.items():
            assert len(_summaries(bot, ch)) == 1, ch
            answer = thread_answer(bot.slack, ch, ts)
            assert answer is not None and f"job-{int(ch[1:]):04d}" in str(answer.get("blocks"))
    spans = [r.l4_analysis for r in caplog.records if hasattr(r, "l4_analysis")]
    assert len(spans) == JOBS
    # in the bot: every analysis was submitted before the first one's answer came back (none waited
    # behind another); on the workers they overlapped as far as their ten threads let them
    assert _most_at_once(spans, "submitted", "answered") == JOBS
    assert _most_at_once(spans, "started", "finished") > 1
    threads_answered = {str(d.slack_thread_ts) for d in _rows(tmp_path, DiagnosisRecord)}
    assert threads_answered == set(threads.values())
    assert {r.state for r in _rows(tmp_path, BotRequest)} == {"done"}


def test_past_the_budget_the_future_is_cancelled(cluster, client, log_root, tmp_path):
    with BotHarness(tmp_path, log_root=log_root, dask_scheduler=cluster.scheduler_address,
                    analysis_timeout=1.5) as bot:
        # every worker thread is busy, so the analysis waits on the cluster past its budget
        # (a paused worker can still be handed a task the scheduler queued before it knew)
        blockers = client.map(time.sleep, [120] * 10, pure=False)
        wait_for(lambda: sum(f.status == "pending" for f in blockers) == 10 and
                 client.run_on_scheduler(_busy_threads) >= 10, what="every worker thread busy")
        ev = message_event("C1", DEV, "job-0001 failed")
        bot.event(ev)
        line = bot.wait_update_containing("stopped after 1.5 s")
        assert "job-0001" in str(line.params)
        wait_for(lambda: _analyses_on_scheduler(client) == 0, what="the cancelled task off the scheduler")
        client.cancel(blockers)
    assert _rows(tmp_path, DiagnosisRecord) == []


def test_an_unreachable_scheduler_is_one_line_and_the_request_stays_queued(log_root, tmp_path):
    with BotHarness(tmp_path, log_root=log_root, dask_scheduler=UNREACHABLE, dask_connect_timeout=1) as bot:
        bot.event(message_event("C1", DEV, "job-0001 failed"))
        update = bot.wait_update_containing("unreachable")
        text = str(update.params.get("text"))
        assert "Dask scheduler tcp://127.0.0.1:9 unreachable" in text and "\n" not in text
        assert "resumes when the bot restarts" in text
        assert bot.services.diagnoser.wait_idle(WAIT)
    rows = _rows(tmp_path, BotRequest)
    assert [r.state for r in rows] == ["queued"]  # the next start resumes it
    assert _rows(tmp_path, DiagnosisRecord) == []


def test_a_scheduler_lost_mid_analysis_falls_back_to_this_machine(log_root, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="l4.cluster")
    own = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                   dashboard_address="127.0.0.1:0",
                                   host="127.0.0.1", silence_logs=logging.CRITICAL)
    try:
        with distributed.Client(own, set_as_default=False) as c, \
                BotHarness(tmp_path, log_root=log_root, dask_scheduler=own.scheduler_address,
                           dask_fallback="local", analysis_timeout=WAIT) as bot:
            _set_status(c, Status.paused)
            ev = message_event("C1", DEV, "job-0002 failed")
            bot.event(ev)
            wait_for(lambda: _analyses_on_scheduler(c) == 1, what="the analysis on the scheduler")
            own.close()  # the scheduler goes away while the analysis waits for a worker
            summary = bot.wait_summary("job-0002")
            assert summary.params["channel"] == "C1"
    finally:
        own.close()
    assert any("connection was lost mid-analysis" in r.getMessage() and "on this machine instead"
               in r.getMessage() for r in caplog.records)
    assert len(_rows(tmp_path, DiagnosisRecord)) == 1
