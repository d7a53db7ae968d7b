"""Digest rendering (Block Kit limits, escaping), posting to the fake Slack, and /l4 digest."""
from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from bot.digest_blocks import (
    MAX_BLOCKS,
    PLOT_FILENAME,
    SECTION_LIMIT,
    DigestInputError,
    digest_blocks,
    digest_fallback,
    digest_text,
    parse_days,
    post_digest,
)
from kb.db import open_db, session
from kb.digest import BacklogItem, NodeOffender, compute_digest
from tests.helpers import digest_seed, png
from tests.helpers.digest_seed import NOW
from tests.helpers.fake_slack import FakeSlack, _block_texts


@pytest.fixture
def db_url(tmp_path):
    url = f"sqlite:///{tmp_path / 'kb.db'}"
    engine = open_db(url)
    with session(engine) as s:
        digest_seed.seed(s)
    engine.dispose()
    return url


@pytest.fixture
def digest(db_url):
    engine = open_db(db_url)
    with session(engine) as s:
        dg = compute_digest(s, days=7, now=NOW)
    engine.dispose()
    return dg


def _check_limits(blocks: list[dict]) -> None:
    assert 0 < len(blocks) <= MAX_BLOCKS
    for b in blocks:
        if b["type"] == "section":
            assert len(b["text"]["text"]) <= SECTION_LIMIT
        if b["type"] == "header":
            assert len(b["text"]["text"]) <= 150


def test_blocks_of_a_seeded_digest(digest) -> None:
    blocks = digest_blocks(digest)
    _check_limits(blocks)
    text = "\n".join(_block_texts(blocks))
    assert "L4 digest: the last 7 days" in text
    assert "`nic-link-down`" in text and "3 jobs (↑ from 1)" in text and "2 jobs (= from 2)" in text
    assert "`node-02`: *drain* (implicated in 3 failed jobs)" in text
    assert "`node-03`: *inspect*" in text
    assert "<https://slack.com/archives/C0DIGEST/p1760000000000100|job-a>" in text
    assert "9 unconfirmed jobs (5 from this window)" in text
    assert "7 jobs diagnosed (3 in the 7 days before) · 9 diagnoses" in text  # two were re-asked
    assert "median request→diagnosis 15 min" in text


def test_escaping_and_limits_with_hostile_and_huge_data(digest) -> None:
    evil = "<!channel> & <https://evil.example|click> `x` |"
    many = replace(
        digest,
        patterns=[replace(digest.patterns[0], title=evil * 20, pattern_id=f"p-{i}", jobs=[evil] * 40)
                  for i in range(60)], patterns_total=300,
        offenders=[NodeOffender(node=evil, jobs=[f"j{i}" for i in range(50)], incidents=50, max_score=1.0,
                                last_seen=NOW, patterns=[evil], recommendation="drain", reason=evil)
                   for _ in range(60)], offenders_total=60,
        backlog=[BacklogItem(diagnosis_id=i, job_id=evil, status="analyzed", diagnosed_at=NOW,
                             slack_channel="C1|<x>", slack_thread_ts="1.2", link="https://x|y")
                 for i in range(80)], backlog_total=500)
    blocks = digest_blocks(many)
    _check_limits(blocks)
    text = "\n".join(_block_texts(blocks))
    assert "<!channel>" not in text and "<https://evil" not in text and "&lt;!channel&gt;" in text
    assert "https://x|y" not in text  # a link is only made from a plain channel id and ts
    assert "more patterns_" in text and "more nodes_" in text and "more jobs_" in text


def test_text_rendering(digest) -> None:
    text = digest_text(digest)
    assert text.splitlines()[0] == "L4 digest: the last 7 days"
    assert "• node-01: drain (critical fault pattern xid-79-fallen-off-bus)" in text
    assert "https://slack.com/archives/C0DIGEST/p1760000000000100" in text


def test_post_digest_with_plot_in_thread(digest) -> None:
    with FakeSlack() as slack:
        client = WebClient(token="xoxb-test", base_url=slack.api_url)
        client.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
        slack.fail_next("chat.postMessage", retry_after=0)  # a 429 first: retried
        ts = post_digest(client, "C0DIGEST", digest)
        (call,) = [c for c in slack.calls_to("chat.postMessage") if c.status == 200]
        assert call.params["channel"] == "C0DIGEST" and call.params["blocks"][0]["type"] == "header"
        assert "7 jobs diagnosed" in call.params["text"] and "9 unconfirmed jobs" in call.params["text"]
        (up,) = slack.uploads.values()
        assert up.completed and up.thread_ts == ts and up.channel == "C0DIGEST"
        assert up.filename == PLOT_FILENAME and png.size(up.content) == (960, 540)
        assert png.text(up.content)["Title"] == "Fault patterns per day"


def test_post_empty_digest_has_no_plot(db_url) -> None:
    engine = open_db(db_url)
    with session(engine) as s:
        empty = compute_digest(s, days=2, now=NOW + timedelta(days=400))
    engine.dispose()
    with FakeSlack() as slack:
        post_digest(WebClient(token="xoxb-test", base_url=slack.api_url), "C1", empty)
        assert len(slack.calls_to("chat.postMessage")) == 1 and not slack.uploads
        assert any("No diagnosis matched" in t for t in slack.texts())


@pytest.mark.parametrize("raw,days", [("", 7), ("  ", 7), ("30", 30), (" 1 ", 1), ("365", 365)])
def test_parse_days(raw, days) -> None:
    assert parse_days(raw) == days


@pytest.mark.parametrize("raw", ["0", "366", "-3", "abc", "7 days", "1e3", "99999"])
def test_bad_days_give_one_line(raw) -> None:
    with pytest.raises(DigestInputError, match="from 1 to 365") as info:
        parse_days(raw)
    assert "\n" not in str(info.value)


def test_digest_of_a_14_day_window(db_url) -> None:
    engine = open_db(db_url)
    with session(engine) as s:
        dg = compute_digest(s, days=14, now=NOW)
    engine.dispose()
    blocks, text = digest_blocks(dg), digest_fallback(dg)
    _check_limits(blocks)
    assert blocks[0]["text"]["text"] == "L4 digest: the last 14 days" and "10 jobs diagnosed" in text
