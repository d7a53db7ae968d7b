"""HTTP mode over real sockets: signatures checked on the raw bytes before any parsing, connections
capped, idle and slow clients cut, no thread per idle connection."""
from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time

import pytest
from slack_bolt import App
from slack_sdk.signature import SignatureVerifier

from bot.httpd import HttpLimits
from bot.serve import http_server
from tests.helpers.fake_slack import FakeSlack
from tests.helpers.wait import WAIT, wait_for

SECRET = "test-signing-secret"
# seconds: the server's cuts here (idle, read and request deadlines of 0.8-3 s) come well within it even
# on a loaded machine; a connection the server does not cut runs past it (the client's socket timeout)
CUT = 30


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        yield fake


def _serve(slack: FakeSlack, limits: HttpLimits):
    from slack_sdk import WebClient

    app = App(signing_secret=SECRET, client=WebClient(token="xoxb-test", base_url=slack.api_url),
              token_verification_enabled=False)
    server = http_server(app, "127.0.0.1", 0, limits=limits)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


class Running:
    def __init__(self, slack: FakeSlack, **limits: float) -> None:
        self.server, self.thread = _serve(slack, HttpLimits(**limits))  # type: ignore[arg-type]
        self.port = self.server.server_address[1]

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def raw(self, data: bytes, timeout: float = 10.0) -> bytes:
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
            s.sendall(data)
            return _read_all(s)


def _read_all(s: socket.socket) -> bytes:
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def _post(body: bytes, headers: dict[str, str]) -> bytes:
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    start = f"POST /slack/events HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n{head}\r\n"
    return start.encode() + body


def _signed(body: bytes) -> bytes:
    ts = str(int(time.time()))
    sig = SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body.decode())
    return _post(body, {"Content-Type": "application/json", "X-Slack-Request-Timestamp": ts,
                        "X-Slack-Signature": sig})


CHALLENGE = b'{"type": "url_verification", "token": "t", "challenge": "c-123"}'


def test_unsigned_and_malformed_requests_get_401_and_one_line(slack, caplog, capfd) -> None:
    caplog.set_level(logging.INFO)
    with Running(slack) as srv:
        assert srv.raw(_post(b"\x00\xffnot json at all", {"Content-Type": "application/json"})).startswith(
            b"HTTP/1.0 401")
        bad_ts = _post(b"{oops", {"Content-Type": "application/json", "X-Slack-Request-Timestamp": "abc",
                                  "X-Slack-Signature": "v0=00"})
        assert srv.raw(bad_ts).startswith(b"HTTP/1.0 401")
        unicode_ts = _post(b"{}", {"X-Slack-Request-Timestamp": "١٢٣", "X-Slack-Signature": "v0=é"})
        assert b" 401 " in srv.raw(unicode_ts)[:20]
        not_utf8 = _post(b"\xff\xfe\x00junk", {"X-Slack-Request-Timestamp": str(int(time.time())),
                                                "X-Slack-Signature": "v0=" + "0" * 64})
        assert b" 401 " in srv.raw(not_utf8)[:20]
        assert b"c-123" in srv.raw(_signed(CHALLENGE))  # a signed request still works
    refusals = [r for r in caplog.records if "invalid Slack signature" in r.getMessage()]
    assert len(refusals) == 4 and not any(r.exc_info for r in caplog.records)
    err = capfd.readouterr().err
    assert "Traceback" not in err


def test_idle_connections_use_no_thread_each_and_are_cut(slack) -> None:
    with Running(slack, max_connections=320, workers=4, idle_timeout=3.0) as srv:
        before = threading.active_count()
        idle = [socket.create_connection(("127.0.0.1", srv.port), timeout=CUT) for _ in range(300)]
        try:
            wait_for(lambda: srv.server.open_connections() >= 300, what="300 open connections")
            assert srv.server.open_connections() == 300
            assert threading.active_count() - before <= 2
            assert b"c-123" in srv.raw(_signed(CHALLENGE))  # served meanwhile
            started = time.monotonic()
            assert all(_read_all(s) == b"" for s in idle)  # closed by the server
            assert time.monotonic() - started < CUT
        finally:
            for s in idle:
                s.close()
        assert threading.active_count() - before <= 5  # at most the worker pool


def test_connections_beyond_the_cap_get_503(slack) -> None:
    with Running(slack, max_connections=5, idle_timeout=5.0) as srv:
        idle = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(5)]
        try:
            wait_for(lambda: srv.server.open_connections() >= 5, what="5 open connections")
            assert srv.raw(_signed(CHALLENGE)).startswith(b"HTTP/1.1 503")
        finally:
            for s in idle:
                s.close()
        time.sleep(0.3)
        assert b"c-123" in srv.raw(_signed(CHALLENGE))


def test_a_slow_client_is_cut_at_the_request_deadline(slack, caplog) -> None:
    caplog.set_level(logging.INFO)
    with Running(slack, read_timeout=0.8, request_deadline=2.0) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=CUT) as s:
            started = time.monotonic()
            s.sendall(b"POST /slack/events HTTP/1.1\r\n")
            try:
                for _ in range(4 * CUT):  # a header byte every 0.5 s: each read in time, the whole not
                    s.sendall(b"X")
                    time.sleep(0.5)
            except OSError:
                pass
            _read_all(s)
            assert time.monotonic() - started < CUT  # unbounded, it would run 2 * CUT s
        with socket.create_connection(("127.0.0.1", srv.port), timeout=CUT) as s:
            started = time.monotonic()
            s.sendall(b"POST /slack/events HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")  # then silence
            assert b"408" in _read_all(s)[:20] and time.monotonic() - started < CUT
    assert not any(r.exc_info for r in caplog.records)


def test_limits_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.config import ConfigError

    monkeypatch.setenv("L4_HTTP_MAX_CONNECTIONS", "7")
    monkeypatch.setenv("L4_HTTP_IDLE_TIMEOUT", "2.5")
    limits = HttpLimits.from_env()
    assert (limits.max_connections, limits.idle_timeout) == (7, 2.5)
    monkeypatch.setenv("L4_HTTP_WORKERS", "many")
    with pytest.raises(ConfigError, match="L4_HTTP_WORKERS must be a number"):
        HttpLimits.from_env()
    from bot.config import Settings
    from bot.serve import check_http

    with pytest.raises(ConfigError, match="L4_HTTP_WORKERS"):  # `l4 bot --http` says so before starting
        check_http(Settings(slack_bot_token="xoxb-t", slack_signing_secret="s"))



def test_the_real_l4_bot_process_refuses_junk_and_cuts_idle_connections(tmp_path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "L4_"))}
    with FakeSlack() as fake:
        env.update({"SLACK_BOT_TOKEN": "xoxb-cli", "SLACK_API_URL": fake.api_url,
                    "SLACK_SIGNING_SECRET": SECRET, "L4_DATABASE_URL": f"sqlite:///{tmp_path / 'kb.db'}",
                    "L4_LOG_ROOT": str(tmp_path),
                    "L4_HTTP_IDLE_TIMEOUT": "1"})
        proc = subprocess.Popen([sys.executable, "-m", "bot.cli", "bot", "--http", "--port", "0"], env=env,
                                cwd=tmp_path, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            line = ""
            for _ in range(20):
                line = proc.stderr.readline()
                m = re.search(r"http://127\.0\.0\.1:(\d+)/slack/events", line)
                if m or not line:
                    break
            assert m, line
            port = int(m.group(1))

            def send(data: bytes) -> bytes:
                with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                    s.sendall(data)
                    return _read_all(s)

            assert b" 401 " in send(_post(b"<<not json>>", {"Content-Type": "application/json"}))[:20]
            assert b" 401 " in send(_post(b"{", {"X-Slack-Request-Timestamp": "soon",
                                                 "X-Slack-Signature": "v0=1"}))[:20]
            with socket.create_connection(("127.0.0.1", port), timeout=CUT) as idle:
                started = time.monotonic()
                assert _read_all(idle) == b"" and time.monotonic() - started < CUT
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=WAIT)
    assert "Traceback" not in err, err
    assert err.count("invalid Slack signature") == 2
