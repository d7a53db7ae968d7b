"""The guarded fetcher against a real HTTP server on 127.0.0.1: redirects re-checked at every hop,
connections pinned to the vetted address, byte and time limits, progress."""
from pathlib import Path

import pytest

from bot.sources.fetch import Budget, Fetcher
from bot.sources.netguard import Refused
from engine.ingest import JobError
from tests.helpers.http_server import HttpServer


def fetcher(settings, progress=None) -> Fetcher:
    return Fetcher(settings, Budget.from_settings(settings, progress))


def test_redirect_chain_ending_at_a_private_address_is_refused(make_settings, fake_dns) -> None:
    fake_dns["internal.example.com"] = ["10.0.0.5"]
    settings = make_settings(report_hosts=["127.0.0.1", "internal.example.com"])
    with HttpServer() as srv:
        srv.route("/a", status=302, headers={"Location": "/b"})
        srv.route("/b", status=307, headers={"Location": "http://internal.example.com/admin?token=xyz"})
        with fetcher(settings) as f, pytest.raises(Refused) as info:
            f.get_bytes(srv.url("/a"), 1000)
        assert str(info.value) == (
            "refused: internal.example.com resolves to a private address (allow it with L4_REPORT_NETWORKS "
            "if intended)")
        assert [r.path for r in srv.seen()] == ["/a", "/b"]  # the private hop was never connected to


def test_redirects_to_other_hosts_file_urls_and_metadata_are_refused(make_settings) -> None:
    with HttpServer() as srv:
        srv.route("/other", status=302, headers={"Location": "https://evil.example.org/x"})
        srv.route("/file", status=302, headers={"Location": "file:///etc/passwd"})
        srv.route("/meta", status=301, headers={"Location": "http://169.254.169.254/latest/meta-data/"})
        with fetcher(make_settings()) as f:
            with pytest.raises(Refused, match="host evil.example.org is not in L4_REPORT_HOSTS"):
                f.get_bytes(srv.url("/other"), 1000)
            with pytest.raises(Refused, match=r"file:// links are not fetched"):
                f.get_bytes(srv.url("/file"), 1000)
            with pytest.raises(Refused, match="host 169.254.169.254 is not in L4_REPORT_HOSTS"):
                f.get_bytes(srv.url("/meta"), 1000)


def test_endless_redirects_stop(make_settings) -> None:
    with HttpServer() as srv:
        srv.route("/loop", status=302, headers={"Location": "/loop"})
        with fetcher(make_settings()) as f, pytest.raises(JobError, match="more than 5 redirects"):
            f.get_bytes(srv.url("/loop"), 1000)
        assert len(srv.seen("/loop")) == 6


def test_allowlisted_name_resolving_to_metadata_is_refused(make_settings, fake_dns) -> None:
    fake_dns["reports.example.com"] = ["169.254.169.254"]
    with fetcher(make_settings(report_hosts=["reports.example.com"])) as f, \
            pytest.raises(Refused, match="reports.example.com resolves to a cloud-metadata address") as info:
        f.get_bytes("http://reports.example.com/r/1", 1000)
    assert "169.254" not in str(info.value)


def test_connection_goes_to_the_vetted_address(make_settings, fake_dns) -> None:
    """The name only exists in L4's resolver: reaching the server proves the socket was opened to the
    address that was checked, while the Host header still carries the name."""
    fake_dns["reports.example.com"] = ["127.0.0.1"]
    settings = make_settings(report_hosts=["reports.example.com"], report_networks=["127.0.0.1/32"])
    with HttpServer() as srv:
        srv.route("/r", body=b"hello", content_type="text/plain")
        with fetcher(settings) as f:
            body, kind = f.get_bytes(f"http://reports.example.com:{srv.port}/r", 1000)
        assert body == b"hello" and kind == "text/plain"
        assert srv.seen("/r")[0].headers["host"] == f"reports.example.com:{srv.port}"
    # and without the explicit network exception, the loopback answer is refused
    with fetcher(make_settings(report_hosts=["reports.example.com"])) as f, \
            pytest.raises(Refused, match="loopback"):
        f.get_bytes("http://reports.example.com:1/r", 1000)


def test_slow_server_times_out(make_settings) -> None:
    with HttpServer() as srv:
        srv.route("/slow", body=b"late", delay=2.0)
        with fetcher(make_settings(fetch_timeout=0.3)) as f, pytest.raises(JobError) as info:
            f.get_bytes(srv.url("/slow"), 1000)
    assert str(info.value) == f"timed out fetching {srv.url('/slow')} (L4_FETCH_TIMEOUT 0.3 s)"


def test_byte_limits_and_progress(make_settings, tmp_path: Path) -> None:
    seen: list[tuple[int, int | None]] = []
    with HttpServer() as srv:
        srv.route("/big", body=b"x" * 5000)
        srv.route("/small", body=b"y" * 3000)
        with fetcher(make_settings(fetch_max_bytes=4000)) as f:
            with pytest.raises(JobError, match="5,000 bytes, more than the 4,000 bytes left"):
                f.download(srv.url("/big"), tmp_path / "big")
        with fetcher(make_settings(), lambda done, total: seen.append((done, total))) as f:
            with pytest.raises(JobError, match="3,000 bytes, more than the 1,000 bytes allowed"):
                f.get_bytes(srv.url("/small"), 1000)
            got = f.download(srv.url("/small"), tmp_path / "small")
    assert got.status == "fetched" and (tmp_path / "small").read_bytes() == b"y" * 3000
    assert not (tmp_path / "big").exists() and not list(tmp_path.glob(".part-*"))
    assert seen and seen[-1][0] >= 3000 and all(t is None for _, t in seen)


def test_server_errors_and_missing_files(make_settings, tmp_path: Path) -> None:
    with HttpServer() as srv:
        srv.route("/boom", status=500, body=b"secret stack trace")
        with fetcher(make_settings()) as f:
            with pytest.raises(JobError, match=r"^http://127.0.0.1:\d+/boom\?… answered HTTP 500$") as info:
                f.get_bytes(srv.url("/boom?token=s3cret"), 1000)
            assert "s3cret" not in str(info.value)
            assert f.get_bytes(srv.url("/none"), 1000) == (None, "")
            assert f.download(srv.url("/none"), tmp_path / "none").status == "missing"
