"""The Slack Web API client every part of L4 uses (bot, scheduled digest, `l4 digest --post`).

``SLACK_API_URL`` when set (tests point it at a local fake); 429s and connection errors retried by
slack_sdk's retry handlers.
"""
from __future__ import annotations

from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler

from bot.config import ConfigError, Settings

RATE_LIMIT_RETRIES = 5
CONNECTION_RETRIES = 3


def make_web_client(settings: Settings) -> WebClient:
    """A WebClient with the bot token of `settings`; ConfigError when there is none."""
    if not settings.slack_bot_token:
        raise ConfigError("SLACK_BOT_TOKEN is not set (the bot token, xoxb-…); see .env.example")
    kwargs: dict[str, Any] = {"token": settings.slack_bot_token}
    if settings.slack_api_url:
        url = settings.slack_api_url
        kwargs["base_url"] = url if url.endswith("/") else url + "/"
    client = WebClient(**kwargs)
    client.retry_handlers = [ConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
                             RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES)]
    return client


def slack_error(exc: BaseException) -> str:
    """What went wrong with a Slack call, in a word: Slack's error code, else the exception's kind."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error") or "error")
    return type(exc).__name__
