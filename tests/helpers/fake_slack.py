"""A fake Slack Web API on 127.0.0.1 for tests (use it through ``SLACK_API_URL``).

It records every call (method, parsed params, headers) and answers like Slack does for the methods
the bot uses: ``auth.test``, ``chat.postMessage``/``update``/``postEphemeral``, ``views.open``/
``update``, ``files.getUploadURLExternal`` → ``POST /upload/<id>`` → ``files.completeUploadExternal``,
``usergroups.users.list``, ``users.info``, ``conversations.info``, ``chat.getPermalink``.
Unknown methods answer ``{"ok": true}``. ``response_url(name)`` gives a URL for slash commands'
``response_url``; what is posted there is recorded as a call of method ``"response_url"``.
Failures can be queued per method (``fail_next``), e.g. a 429 with Retry-After, a 500/503, or
``msg_too_long``; so can slow answers (``delay_next``: the call takes effect at once, its answer comes
``seconds`` later, as when Slack is slow and the client gives up). ``thread(channel, ts)`` gives a
thread's messages as they stand (``conversations.replies`` answers with them too).
Socket Mode: ``apps.connections.open`` hands out a ``ws://127.0.0.1`` URL of a small WebSocket
endpoint; ``socket_send(envelope)`` pushes an envelope to the connected clients, and what they send
back is recorded as calls of method ``"socket_mode"`` (the acknowledgements, with ``envelope_id``).

    with FakeSlack() as slack:
        client = WebClient(token="xoxb-test", base_url=slack.api_url)
        ...
        slack.calls_to("chat.postMessage")
"""
from __future__ import annotations

import base64
import hashlib
import itertools
import json
import socketserver
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.helpers.wait import WAIT

BOT_USER_ID = "UBOT0001"
BOT_ID = "BBOT0001"
TEAM_ID = "T0000TEST"


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    headers: dict[str, str]
    status: int = 200  # what the fake answered
    at: float = field(default_factory=time.time)  # when it arrived (time.time())


@dataclass
class Upload:
    file_id: str
    filename: str
    length: int
    content: bytes = b""
    completed: bool = False
    channel: str | None = None
    thread_ts: str | None = None
    title: str | None = None


@dataclass
class _Failure:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Rule:
    method: str
    where: Callable[[dict[str, Any]], bool]
    failure: _Failure | None  # None: answer normally, ``delay`` seconds late
    left: int | None  # None: every matching call
    delay: float = 0.0

    def applies(self, method: str, params: dict[str, Any]) -> bool:
        if method != self.method or self.left == 0 or not self.where(params):
            return False
        if self.left is not None:
            self.left -= 1
        return True


class FakeSlack:
    """A threaded HTTP server that plays the Slack Web API."""

    def __init__(self, usergroups: dict[str, list[str]] | None = None) -> None:
        self.calls: list[Call] = []
        self.uploads: dict[str, Upload] = {}
        self.usergroups: dict[str, list[str]] = dict(usergroups or {})
        self._failures: dict[str, list[_Failure]] = {}
        self._delays: dict[str, list[float]] = {}
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._ts = itertools.count(1)
        self._ids = itertools.count(1)
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}  # (channel, ts) -> last version
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False  # stop() does not wait out the answers delayed on purpose
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._ws_clients: list[_WsPeer] = []
        self._ws_server = _WsServer(self)
        self._ws_thread = threading.Thread(target=self._ws_server.serve_forever, daemon=True)

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def api_url(self) -> str:
        """What goes into SLACK_API_URL / WebClient(base_url=...)."""
        return self.base_url + "/api/"

    def start(self) -> FakeSlack:
        self._thread.start()
        self._ws_thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        for peer in list(self._ws_clients):
            peer.close()
        self._ws_server.shutdown()
        self._ws_server.server_close()

    @property
    def socket_url(self) -> str:
        host, port = self._ws_server.server_address[:2]
        return f"ws://{host}:{port}/link/?ticket=test"

    def socket_send(self, envelope: dict[str, Any], timeout: float = WAIT) -> None:
        """Push a Socket Mode envelope (``{"envelope_id", "type", "payload", ...}``) to every client
        connected (waiting for one to connect)."""
        self.wait_for(lambda s: bool(s._ws_clients), timeout)
        for peer in list(self._ws_clients):
            peer.send_text(json.dumps(envelope))

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test controls ---------------------------------------------------------------------------
    def fail_next(self, method: str, *, status: int = 429, error: str = "ratelimited",
                  retry_after: int | None = 1, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` with an error (default: a 429)."""
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        with self._lock:
            self._failures.setdefault(method, []).extend(
                _Failure(status, {"ok": False, "error": error}, headers) for _ in range(times))

    def fail_matching(self, method: str, where: Callable[[dict[str, Any]], bool], *, status: int = 500,
                      error: str = "internal_error", times: int | None = None,
                      retry_after: int | None = None) -> None:
        """Answer calls of ``method`` whose params satisfy ``where`` with an error (``times`` of
        them; None: all), e.g. ``msg_too_long`` (status 200) for summaries with log examples."""
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        with self._lock:
            self._rules.append(_Rule(method, where, _Failure(status, {"ok": False, "error": error}, headers),
                                     times))

    def delay_matching(self, method: str, where: Callable[[dict[str, Any]], bool], seconds: float, *,
                       times: int = 1) -> None:
        """Answer ``times`` calls of ``method`` whose params satisfy ``where`` ``seconds`` late."""
        with self._lock:
            self._rules.append(_Rule(method, where, None, times, seconds))

    def delay_next(self, method: str, seconds: float, *, times: int = 1) -> None:
        """Answer the next ``times`` calls of ``method`` ``seconds`` late (they take effect at once)."""
        with self._lock:
            self._delays.setdefault(method, []).extend([seconds] * times)

    def thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The messages of a thread (its parent, if the bot posted it, and the replies), oldest first."""
        with self._lock:
            return self._thread_messages(channel, thread_ts)

    def _thread_messages(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        found = [m for (ch, ts), m in self.messages.items()
                 if ch == channel and (ts == thread_ts or m.get("thread_ts") == thread_ts)]
        return sorted(found, key=lambda m: float(m["ts"]))

    def response_url(self, name: str = "cmd") -> str:
        """A URL to put in a slash command's ``response_url``; posts to it are recorded."""
        return f"{self.base_url}/respond/{name}"

    def messages_by_text(self, needle: str) -> list[dict[str, Any]]:
        """Posted messages (last versions) whose text contains ``needle``, oldest first."""
        with self._lock:
            return [m for m in self.messages.values() if needle in str(m.get("text"))]

    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, predicate: Callable[[FakeSlack], bool], timeout: float = WAIT) -> None:
        """Block until ``predicate(self)`` holds (checked after every call), or raise TimeoutError
        (the deadline: tests/helpers/wait.py)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                self._lock.release()
                try:
                    ok = predicate(self)
                finally:
                    self._lock.acquire()
                if ok:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"fake Slack: condition not met in {timeout}s; "
                                       f"calls: {[c.method for c in self.calls]}")
                self._cond.wait(min(left, 0.2))

    def wait_for_call(self, method: str, count: int = 1, timeout: float = WAIT,
                      where: Callable[[Call], bool] | None = None) -> list[Call]:
        """Wait until ``count`` calls of ``method`` (matching ``where``) were made; return them."""
        def matching(s: FakeSlack) -> list[Call]:
            return [c for c in s.calls_to(method) if where is None or where(c)]
        self.wait_for(lambda s: len(matching(s)) >= count, timeout)
        return matching(self)

    def texts(self, method: str = "chat.postMessage") -> list[str]:
        """Every text and block text sent with ``method`` (for assertions on content)."""
        out: list[str] = []
        for c in self.calls_to(method):
            out.append(str(c.params.get("text") or ""))
            out.extend(_block_texts(c.params.get("blocks")))
        return out

    # -- the API ----------------------------------------------------------------------------------
    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "url": "https://l4-test.slack.com/", "team": "l4-test", "user": "l4",
                    "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID}
        if method in ("chat.postMessage", "chat.postEphemeral"):
            channel = str(params.get("channel") or "")
            if not channel:
                return {"ok": False, "error": "channel_not_found"}
            ts = f"{1700000000 + next(self._ts)}.000100"
            msg = {"type": "message", "text": params.get("text", ""), "blocks": params.get("blocks"),
                   "ts": ts, "thread_ts": params.get("thread_ts"), "user": BOT_USER_ID, "bot_id": BOT_ID}
            if method == "chat.postEphemeral":
                return {"ok": True, "message_ts": ts}
            self.messages[(channel, ts)] = msg
            return {"ok": True, "channel": channel, "ts": ts, "message": msg}
        if method == "chat.update":
            key = (str(params.get("channel")), str(params.get("ts")))
            if key not in self.messages:
                return {"ok": False, "error": "message_not_found"}
            self.messages[key].update({"text": params.get("text", ""), "blocks": params.get("blocks")})
            return {"ok": True, "channel": key[0], "ts": key[1], "text": params.get("text", "")}
        if method in ("views.open", "views.update", "views.push"):
            view = params.get("view")
            if isinstance(view, str):
                view = json.loads(view)
            if method == "views.open" and not params.get("trigger_id"):
                return {"ok": False, "error": "invalid_trigger_id"}
            return {"ok": True, "view": {**(view or {}), "id": f"V{next(self._ids):07d}"}}
        if method == "files.getUploadURLExternal":
            fid = f"F{next(self._ids):07d}"
            self.uploads[fid] = Upload(fid, str(params.get("filename")), int(params.get("length") or 0))
            return {"ok": True, "upload_url": f"{self.base_url}/upload/{fid}", "file_id": fid}
        if method == "files.completeUploadExternal":
            files = params.get("files")
            if isinstance(files, str):
                files = json.loads(files)
            out = []
            for f in files or []:
                up = self.uploads.get(f.get("id"))
                if up is None:
                    return {"ok": False, "error": "file_not_found"}
                up.completed, up.title = True, f.get("title")
                up.channel = params.get("channel_id")
                up.thread_ts = params.get("thread_ts")
                out.append({"id": up.file_id, "name": up.filename, "title": up.title})
            return {"ok": True, "files": out}
        if method == "usergroups.users.list":
            group = str(params.get("usergroup"))
            if group not in self.usergroups:
                return {"ok": False, "error": "no_such_subteam"}
            return {"ok": True, "users": list(self.usergroups[group])}
        if method == "users.info":
            user = str(params.get("user"))
            return {"ok": True, "user": {"id": user, "name": user.lower(), "is_bot": False}}
        if method == "apps.connections.open":
            return {"ok": True, "url": self.socket_url}
        if method == "chat.getPermalink":
            ch, ts = str(params.get("channel") or ""), str(params.get("message_ts") or "")
            if not ch or not ts:
                return {"ok": False, "error": "invalid_arguments"}
            return {"ok": True, "channel": ch,
                    "permalink": f"https://l4-test.slack.com/archives/{ch}/p{ts.replace('.', '')}"}
        if method == "conversations.replies":
            found = self._thread_messages(str(params.get("channel")), str(params.get("ts")))
            return {"ok": True, "messages": [dict(m) for m in found], "has_more": False}
        if method == "conversations.info":
            ch = str(params.get("channel"))
            return {"ok": True, "channel": {"id": ch, "name": ch.lower(), "is_member": True}}
        return {"ok": True}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_GET(self) -> None:  # slack_sdk may GET some methods
                self._handle(b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._handle(self.rfile.read(length) if length else b"")

            def _handle(self, body: bytes) -> None:
                path = urlparse(self.path)
                if path.path.startswith("/upload/"):
                    fid = path.path.rsplit("/", 1)[-1]
                    with fake._cond:
                        up = fake.uploads.get(fid)
                        if up is not None:
                            up.content = _multipart_payload(body, self.headers.get("Content-Type", ""))
                        fake.calls.append(Call("upload", {"file_id": fid, "bytes": len(body)},
                                               dict(self.headers), 200 if up else 404))
                        fake._cond.notify_all()
                    self._send(200 if up else 404, b"OK - " + str(len(body)).encode(), "text/plain")
                    return
                if path.path.startswith("/respond/"):
                    params = _params(body, self.headers.get("Content-Type", ""), path.query)
                    with fake._cond:
                        fake.calls.append(Call("response_url", params, dict(self.headers)))
                        fake._cond.notify_all()
                    self._send(200, b"ok", "text/plain")
                    return
                if not path.path.startswith("/api/"):
                    self._send(404, b"not found", "text/plain")
                    return
                method = path.path[len("/api/"):]
                params = _params(body, self.headers.get("Content-Type", ""), path.query)
                with fake._cond:
                    queue = fake._failures.get(method)
                    failure = queue.pop(0) if queue else None
                    delays = fake._delays.get(method)
                    delay = delays.pop(0) if delays and failure is None else 0.0
                    for rule in fake._rules:
                        if failure is None and not delay and rule.applies(method, params):
                            failure, delay = rule.failure, rule.delay
                    if failure is None:
                        status, answer, extra = 200, fake._answer(method, params), {}
                    else:
                        status, answer, extra = failure.status, failure.body, failure.headers
                    fake.calls.append(Call(method, params, dict(self.headers), status))
                    fake._cond.notify_all()
                if delay:
                    time.sleep(delay)
                try:
                    self._send(status, json.dumps(answer).encode(), "application/json", extra)
                except OSError:  # the client gave up waiting
                    pass

            def _send(self, status: int, data: bytes, ctype: str, extra: dict[str, str] | None = None,
                      ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _params(body: bytes, ctype: str, query: str) -> dict[str, Any]:
    params: dict[str, Any] = {k: v[-1] for k, v in parse_qs(query).items()}
    if body:
        if ctype.startswith("application/json"):
            params.update(json.loads(body.decode("utf-8")))
        elif ctype.startswith("application/x-www-form-urlencoded"):
            params.update({k: v[-1] for k, v in parse_qs(body.decode("utf-8")).items()})
        elif ctype.startswith("multipart/form-data"):
            params["_multipart_bytes"] = len(body)
    for key in ("blocks", "attachments", "view", "files"):  # form-encoded JSON fields
        if isinstance(params.get(key), str):
            try:
                params[key] = json.loads(params[key])
            except ValueError:
                pass
    return params


def _multipart_payload(body: bytes, ctype: str) -> bytes:
    """The file bytes of a one-part multipart body (or the body itself when it is not multipart)."""
    if "boundary=" not in ctype:
        return body
    boundary = ctype.split("boundary=", 1)[1].strip('"').encode()
    for part in body.split(b"--" + boundary):
        head, sep, rest = part.partition(b"\r\n\r\n")
        if sep and b"filename=" in head:
            return rest.rsplit(b"\r\n", 1)[0]
    return body


def _block_texts(blocks: Any) -> list[str]:
    out: list[str] = []
    if isinstance(blocks, dict):
        for k, v in blocks.items():
            if k == "text" and isinstance(v, str):
                out.append(v)
            else:
                out.extend(_block_texts(v))
    elif isinstance(blocks, list):
        for b in blocks:
            out.extend(_block_texts(b))
    return out


class _WsPeer:
    """One WebSocket client of the fake Socket Mode endpoint (RFC 6455, text frames, ping/pong)."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.lock = threading.Lock()

    def send_frame(self, opcode: int, data: bytes) -> None:
        n = len(data)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([n])
        elif n < 65536:
            head += bytes([126]) + struct.pack("!H", n)
        else:
            head += bytes([127]) + struct.pack("!Q", n)
        with self.lock:
            self.sock.sendall(head + data)

    def send_text(self, text: str) -> None:
        self.send_frame(0x1, text.encode("utf-8"))

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def read_frame(self) -> tuple[int, bytes]:
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        mask = self._read(4) if b1 & 0x80 else b"\0\0\0\0"
        data = bytes(c ^ mask[i % 4] for i, c in enumerate(self._read(n)))
        return b0 & 0x0F, data

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class _WsServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, fake: FakeSlack) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _WsHandler)


class _WsHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        fake: FakeSlack = self.server.fake  # type: ignore[attr-defined]
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.request.recv(4096)
            if not chunk:
                return
            head += chunk
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:]) if k}
        key = headers.get("sec-websocket-key", "")
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode())
                                  .digest()).decode()
        self.request.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                              f"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n").encode())
        peer = _WsPeer(self.request)
        peer.send_text(json.dumps({"type": "hello", "num_connections": 1,
                                   "connection_info": {"app_id": "A0L4TEST"}}))
        with fake._cond:
            fake._ws_clients.append(peer)
            fake.calls.append(Call("socket_mode.connect", {"path": lines[0]}, headers))
            fake._cond.notify_all()
        try:
            while True:
                opcode, data = peer.read_frame()
                if opcode == 0x8:  # close
                    peer.send_frame(0x8, data[:2])
                    return
                if opcode == 0x9:  # ping
                    peer.send_frame(0xA, data)
                elif opcode == 0x1:
                    try:
                        params = json.loads(data.decode("utf-8"))
                    except ValueError:
                        params = {"raw": data.decode("utf-8", "replace")}
                    with fake._cond:
                        fake.calls.append(Call("socket_mode", params, {}))
                        fake._cond.notify_all()
        except (ConnectionError, OSError):
            return
        finally:
            with fake._cond:
                if peer in fake._ws_clients:
                    fake._ws_clients.remove(peer)
                fake._cond.notify_all()
