"""The bot's Prometheus metrics (``GET /metrics``, prometheus-client's text format).

One registry for the process (not prometheus-client's global one, so that nothing else registers
into it): requests by what the bot decided, analyses by outcome and their durations, the queue
depth (queued and running requests of this bot), errors by kind, and scheduled digest runs.
"""
from __future__ import annotations

from collections.abc import Callable

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

disable_created_metrics()  # no *_created series: a counter's start time is noise on a dashboard
REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter("l4_requests", "Diagnosis requests received, by what the bot decided "
                   "(accepted, already_running, busy)", ["decision"], registry=REGISTRY)
ANALYSES = Counter("l4_analyses", "Analyses that ended, by outcome (stored, refused, timed_out, failed, "
                   "died, stopped)", ["outcome"], registry=REGISTRY)
ANALYSIS_SECONDS = Histogram("l4_analysis_seconds", "Seconds one analysis took (taken to concluded)",
                             buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200), registry=REGISTRY)
QUEUE_DEPTH = Gauge("l4_queue_depth", "Requests this bot has queued or running", registry=REGISTRY)
ERRORS = Counter("l4_errors", "Errors by kind (analysis_failed, analysis_died, analysis_timeout, "
                 "slack, database, digest)", ["kind"], registry=REGISTRY)
DIGESTS = Counter("l4_digest_runs", "Scheduled digest runs, by outcome (posted, other_bot, failed)",
                  ["outcome"], registry=REGISTRY)
TAKEOVERS = Counter("l4_requests_taken_over", "Requests taken over from a stopped or dead bot",
                    registry=REGISTRY)

CONTENT_TYPE = CONTENT_TYPE_LATEST


def watch_queue(depth: Callable[[], float]) -> None:
    """Report ``depth()`` as the queue depth at every scrape."""
    QUEUE_DEPTH.set_function(depth)


_OUTCOMES = {"Stored": "stored", "Refused": "refused", "TimedOut": "timed_out", "Failed": "failed",
             "Died": "died", "Stopped": "stopped"}  # bot.analysis_process' outcome classes
_OUTCOME_ERRORS = {"timed_out": "analysis_timeout", "failed": "analysis_failed", "died": "analysis_died"}


def count_outcome(outcome: object) -> None:
    """Count an analysis' outcome (an ``bot.analysis_process.Outcome``), and its error if it is one."""
    name = _OUTCOMES.get(type(outcome).__name__, "other")
    ANALYSES.labels(name).inc()
    if name in _OUTCOME_ERRORS:
        ERRORS.labels(_OUTCOME_ERRORS[name]).inc()


def exposition() -> bytes:
    """The metrics in Prometheus' text format."""
    return generate_latest(REGISTRY)
