"""Hostile log locations in a failure report, and hostile links: always one safe JobError line,
never an internal error (a ValueError from urljoin/urlsplit, httpx.InvalidURL...)."""
import json
from pathlib import Path

import pytest

from bot.resolve import resolve
from engine.ingest import JobError
from tests.helpers.http_server import HttpServer

HOSTILE = [
    "http://[::1/x", "https://[::1", "[::1", "http://[::1]:x/", "http://[fe80::1%25eth0]/logs/",
    "http://[v1.fe]/", "http://user@127.0.0.1/logs/job-1/", "http://user:xoxb-secret@127.0.0.1/logs/",
    "http://ünïcødé.example/logs/", "http://xn--zz--.example/", "http://bücher.例え.テスト/x",
    "http://127.0.0.1:70000/x/", "http://127.0.0.1:-1/x/", "http://127.0.0.1:99999999999999999999/",
    "http://" + "a" * 5000 + "/", "logs/" + "b" * 5000, "logs/x\r\nX-Injected: 1", "http://127.0.0.1/\r\n/x",
    "http://127.0.0.1/logs/\x00/", "https://\x00/", "\\\\server\\share\\job-1", "http://%zz/",
    "//evil.example.org/logs/", "http:///x", "http://", "ftp://127.0.0.1/logs/", "logs/%00/x",
    "http://[::ffff:169.254.169.254]/logs/", "http://0x7f.1/logs/", "javascript:alert(1)", "?x=1", "#frag",
]


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text and "xoxb-secret" not in text, text
    return text


@pytest.mark.parametrize("location", HOSTILE)
def test_hostile_report_locations_are_one_line_job_errors(tmp_path: Path, make_settings, fake_dns,
                                                          location: str) -> None:
    with HttpServer(folder=tmp_path / "www") as srv:
        srv.route("/r", body=json.dumps({"job_id": "job-1", "log_url": location}).encode(),
                  content_type="application/json")
        s = make_settings(fetch_timeout=0.5, fetch_time_limit=5.0)
        with pytest.raises(JobError) as info:
            resolve(srv.url("/r"), settings=s, local_paths=False)
        one_line(info.value)


def test_an_invalid_location_says_so(tmp_path: Path, make_settings) -> None:
    with HttpServer(folder=tmp_path / "www") as srv:
        for location in ("http://[::1/x", "https://[::1"):
            srv.route("/r", body=json.dumps({"job_id": "job-1", "log_url": location}).encode(),
                      content_type="application/json")
            with pytest.raises(JobError, match="^the report's log location is not a valid URL$"):
                resolve(srv.url("/r"), settings=make_settings(), local_paths=False)


@pytest.mark.parametrize("link", [
    "http://[::1/r", "https://[::1", "http://[::1]:x/r", "http://user@127.0.0.1:1/r", "http://ünïcødé.example/r",
    "http://127.0.0.1:70000/r", "http://" + "c" * 3000, "http://127.0.0.1/r\r\nX: 1", "http://%zz/r",
    "https://\x00/r", "http:///r", "http://xoxb-secret@[::1/r",
])
def test_hostile_links_are_one_line_job_errors(make_settings, fake_dns, link: str) -> None:
    with pytest.raises(JobError) as info:
        resolve(link, settings=make_settings(fetch_timeout=0.5, fetch_time_limit=5.0), local_paths=False)
    one_line(info.value)


def test_hostile_redirects_are_refused_in_one_line(tmp_path: Path, make_settings, fake_dns) -> None:
    with HttpServer(folder=tmp_path / "www") as srv:
        for k, target in enumerate(["http://[::1/x", "http://127.0.0.1:99999999999999999999/r",
                                    "http://xn--zz--.example/r", "http://127.0.0.1:0/r"]):
            srv.route(f"/go/{k}", status=302, headers={"Location": target})
            with pytest.raises(JobError) as info:  # refused, or httpx's own "invalid location header"
                resolve(srv.url(f"/go/{k}"), settings=make_settings(), local_paths=False)
            one_line(info.value)
