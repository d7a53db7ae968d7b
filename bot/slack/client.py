"""The Slack Web API client every part of L4 uses (bot, scheduled digest, `l4 digest --post`).

``SLACK_API_URL`` when set (tests point it at a local fake). slack_sdk's retry handlers retry 429s
(waiting as Retry-After says), 500/502/503/504 answers and connection errors, within a bounded
total per call: at most RETRY_COUNT retries and RETRY_SECONDS of waiting. Past either bound the
call fails loudly: one warning in the log and the SDK's error (e.g. ``ratelimited``) raised to the
caller; never a silent drop.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from bot.config import ConfigError, Settings

log = logging.getLogger("l4.slack")
RATE_LIMIT_RETRIES = 10  # 429s retried per call (each after its Retry-After)
SERVER_ERROR_RETRIES = 3  # 5xx answers retried per call (backoff 0.5 s, 1 s, 2 s)
CONNECTION_RETRIES = 3
RETRY_SECONDS = 60.0  # waiting per call, over all its retries: a longer Retry-After is not waited for
SERVER_ERRORS = (500, 502, 503, 504)
_STARTED = "l4_first_failure"


class _Bounded(RetryHandler):
    """A retry handler that stops once the call has waited RETRY_SECONDS (or would, with the next
    wait), and says so in the log when it gives up on a failure it handles."""

    what = "failed"

    def can_retry(self, *, state: RetryState, request: HttpRequest, response: HttpResponse | None = None,
                  error: Exception | None = None) -> bool:
        if not self._can_retry(state=state, request=request, response=response, error=error):
            return False
        if state.custom_values is None:
            state.custom_values = {}
        started = state.custom_values.setdefault(_STARTED, time.monotonic())
        waited = time.monotonic() - started
        wait = self._wait(state, response)
        if state.current_attempt >= self.max_retry_count or waited + wait > RETRY_SECONDS:
            log.warning("Slack %s %s %d time(s) in %.0f s; giving up (next wait %.0f s)", _method(request),
                        self.what, state.current_attempt + 1, waited, wait)
            return False
        return True

    def _wait(self, state: RetryState, response: HttpResponse | None) -> float:
        return self.interval_calculator.calculate_sleep_duration(state.current_attempt)


class BoundedRateLimitRetry(_Bounded, RateLimitErrorRetryHandler):
    what = "rate-limited the call (429)"

    def _wait(self, state: RetryState, response: HttpResponse | None) -> float:
        for key, values in (response.headers if response is not None else {}).items():
            if key.lower() == "retry-after":
                raw = values[0] if isinstance(values, list) and values else str(values)
                return float(raw) + 1 if str(raw).strip().isdigit() else RETRY_SECONDS + 1
        return 2.0  # the SDK waits 1-2 s without the header


class BoundedServerErrorRetry(_Bounded, ServerErrorRetryHandler):
    what = "answered a server error"

    def _can_retry(self, *, state: RetryState, request: HttpRequest, response: HttpResponse | None = None,
                   error: Exception | None = None) -> bool:
        return response is not None and response.status_code in SERVER_ERRORS


class BoundedConnectionErrorRetry(_Bounded, ConnectionErrorRetryHandler):
    what = "could not be reached"


def retry_handlers() -> list[RetryHandler]:
    """The bounded retry handlers of every WebClient L4 makes."""
    return [BoundedConnectionErrorRetry(max_retry_count=CONNECTION_RETRIES),
            BoundedRateLimitRetry(max_retry_count=RATE_LIMIT_RETRIES),
            BoundedServerErrorRetry(max_retry_count=SERVER_ERROR_RETRIES)]


def _method(request: HttpRequest) -> str:
    return str(request.url).rsplit("/", 1)[-1].split("?", 1)[0][:60]


def make_web_client(settings: Settings) -> WebClient:
    """A WebClient with the bot token of `settings`; ConfigError when there is none."""
    if not settings.slack_bot_token:
        raise ConfigError("SLACK_BOT_TOKEN is not set (the bot token, xoxb-…); see .env.example")
    kwargs: dict[str, Any] = {"token": settings.slack_bot_token}
    if settings.slack_api_url:
        url = settings.slack_api_url
        kwargs["base_url"] = url if url.endswith("/") else url + "/"
    client = WebClient(**kwargs)
    client.retry_handlers = retry_handlers()
    return client


def slack_error(exc: BaseException) -> str:
    """What went wrong with a Slack call, in a word: Slack's error code, else the exception's kind."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or "error")
    return type(exc).__name__
