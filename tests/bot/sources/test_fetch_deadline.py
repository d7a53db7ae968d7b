"""L4_FETCH_TIME_LIMIT holds on the wall clock: a server that sends one byte every 0.2 s (each read in
time for L4_FETCH_TIMEOUT) is cut at the limit, in the headers or in the body, over http(s)."""
from __future__ import annotations

import time

import pytest

from bot.resolve import resolve
from bot.sources.fetch import Budget, Fetcher
from engine.ingest import JobError
from tests.helpers.http_server import HttpServer

LIMIT = 1.5


def _fetcher(settings) -> Fetcher:
    return Fetcher(settings, Budget.from_settings(settings))


@pytest.mark.parametrize("path", ["/slow-head", "/slow-body"])
def test_a_dripping_server_is_cut_at_the_time_limit(make_settings, tmp_path, path: str) -> None:
    settings = make_settings(fetch_timeout=5.0, fetch_time_limit=LIMIT)
    with HttpServer() as srv:
        srv.route("/slow-head", body=b"x" * 100, drip=0.2, drip_head=True)  # the head alone: ~14 s
        srv.route("/slow-body", body=b"y" * 400, drip=0.2)  # 80 s, far less than one 256 KiB chunk
        started = time.monotonic()
        with _fetcher(settings) as f, pytest.raises(JobError) as info:
            f.download(srv.url(path), tmp_path / "out.log")
        took = time.monotonic() - started
    assert f"longer than the {LIMIT:g} s limit (L4_FETCH_TIME_LIMIT)" in str(info.value)
    assert LIMIT - 0.1 <= took < LIMIT + 10.0, took  # unbounded: 14 s (head), 80 s (body)
    assert not (tmp_path / "out.log").exists() and not list(tmp_path.glob(".part-*"))


def test_a_report_link_to_a_dripping_server_is_cut(make_settings, monkeypatch) -> None:
    settings = make_settings(fetch_timeout=5.0, fetch_time_limit=LIMIT)
    with HttpServer() as srv:
        srv.route("/r/1", body=b'{"job_id": "job-1"}' + b" " * 200, drip=0.2,
                  content_type="application/json")
        started = time.monotonic()
        with pytest.raises(JobError, match="L4_FETCH_TIME_LIMIT"):
            resolve(srv.url("/r/1"), settings=settings)
        assert time.monotonic() - started < LIMIT + 10.0  # unbounded: 44 s


def test_a_quick_server_is_unaffected(make_settings, tmp_path) -> None:
    settings = make_settings(fetch_time_limit=LIMIT)
    with HttpServer() as srv:
        srv.route("/fast", body=b"z" * 300_000)
        with _fetcher(settings) as f:
            assert f.download(srv.url("/fast"), tmp_path / "fast.log").size == 300_000
