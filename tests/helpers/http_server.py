"""A real HTTP server on 127.0.0.1 for tests: serve a folder (with directory indexes and ETags,
like ``python -m http.server`` plus revalidation) and/or fixed routes (redirects, slow answers,
custom bodies). Every request is recorded.

    with HttpServer(folder=tmp_path / "www") as srv:
        srv.route("/report/1", body=b'{"job_id": "job-1"}', content_type="application/json")
        srv.route("/go", status=302, headers={"Location": "http://10.0.0.1/"})
        srv.url("/report/1")          # http://127.0.0.1:<port>/report/1
        srv.statuses("/jobs/job-1/r0.log")

TLS mode: give `certfile`/`keyfile` (PEM) or a server `ssl_context`; `url()` then gives https://.
The handshake runs in the request's thread; failed handshakes are recorded in `tls_errors`, and
with `certfile` the server names clients asked for (SNI) in `sni_names`.

    with HttpServer(folder=www, certfile=cert, keyfile=key) as srv:
        srv.url("/r/1", host="reports.l4-test.internal")   # https://reports.l4-test.internal:<port>/r/1
"""
from __future__ import annotations

import hashlib
import html
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit


@dataclass
class Route:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/octet-stream"
    delay: float = 0.0  # seconds before answering
    drip: float = 0.0  # seconds between bytes: the body is sent one byte at a time
    drip_head: bool = False  # the status line and headers too


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    status: int = 0


class _TlsHttpServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that wraps each accepted socket in TLS in the request's own thread (so a
    client that never finishes its handshake cannot stall the accept loop)."""

    def __init__(self, address: tuple[str, int], handler: type, owner: HttpServer,
                 context: ssl.SSLContext) -> None:
        super().__init__(address, handler)
        self.owner = owner
        self.context = context

    def finish_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        request.settimeout(5.0)  # for the handshake only
        try:
            wrapped = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            with self.owner._lock:
                self.owner.tls_errors.append(f"{type(exc).__name__}: {exc}")
            return
        wrapped.settimeout(None)
        try:
            super().finish_request(wrapped, client_address)
        finally:
            wrapped.close()


class HttpServer:
    def __init__(self, folder: Path | None = None, *, certfile: Path | str | None = None,
                 keyfile: Path | str | None = None, ssl_context: ssl.SSLContext | None = None) -> None:
        self.folder = folder
        self.routes: dict[str, Route] = {}
        self.requests: list[Seen] = []
        self.tls_errors: list[str] = []  # failed TLS handshakes (TLS mode)
        self.sni_names: list[str | None] = []  # server names clients sent (TLS mode with certfile)
        self._lock = threading.Lock()
        if certfile is not None and ssl_context is None:
            ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ssl_context.load_cert_chain(str(certfile), str(keyfile) if keyfile is not None else None)
            ssl_context.sni_callback = self._record_sni
        self.ssl_context = ssl_context
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                seen = Seen("GET", self.path, {k.lower(): v for k, v in self.headers.items()})
                with server._lock:
                    server.requests.append(seen)
                seen.status = server._answer(self)

        if ssl_context is None:
            self._httpd: ThreadingHTTPServer = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        else:
            self._httpd = _TlsHttpServer(("127.0.0.1", 0), Handler, self, ssl_context)
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self.port = self._httpd.server_address[1]
        # a short poll interval: `shutdown()` (leaving the `with`) waits for it
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    def __enter__(self) -> HttpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def scheme(self) -> str:
        return "http" if self.ssl_context is None else "https"

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        """The URL of `path`; `host` is a name tests map to 127.0.0.1 (e.g. with `fake_dns`)."""
        return f"{self.scheme}://{host}:{self.port}{path}"

    def _record_sni(self, sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        with self._lock:
            self.sni_names.append(name)

    def route(self, path: str, **kwargs: object) -> Route:
        self.routes[path] = Route(**kwargs)  # type: ignore[arg-type]
        return self.routes[path]

    def seen(self, prefix: str = "/") -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if r.path.startswith(prefix)]

    def statuses(self, path: str) -> list[int]:
        return [r.status for r in self.seen(path) if r.path == path]

    # -- answering --
    def _answer(self, h: BaseHTTPRequestHandler) -> int:
        route = self.routes.get(urlsplit(h.path).path)
        if route is not None:
            if route.delay:
                time.sleep(route.delay)
            if route.drip:
                return _drip(h, route)
            return _send(h, route.status, route.body, {"Content-Type": route.content_type, **route.headers})
        if self.folder is None:
            return _send(h, 404, b"not found", {"Content-Type": "text/plain"})
        rel = unquote(urlsplit(h.path).path).lstrip("/")
        target = (self.folder / rel).resolve()
        if not target.is_relative_to(self.folder.resolve()) or not target.exists():
            return _send(h, 404, b"not found", {"Content-Type": "text/plain"})
        if target.is_dir():
            if not h.path.endswith("/"):
                return _send(h, 301, b"", {"Location": h.path + "/"})
            links = "".join(
                f'<li><a href="{quote(p.name)}{"/" if p.is_dir() else ""}">{html.escape(p.name)}</a></li>'
                for p in sorted(target.iterdir())
            )
            body = f"<!DOCTYPE HTML><html><body><h1>Directory listing</h1><ul>{links}</ul></body></html>"
            return _send(h, 200, body.encode(), {"Content-Type": "text/html; charset=utf-8"})
        data = target.read_bytes()
        etag = '"' + hashlib.sha1(data).hexdigest()[:16] + '"'
        if h.headers.get("If-None-Match") == etag:
            return _send(h, 304, b"", {"ETag": etag})
        kind = "application/json" if target.suffix == ".json" else "application/octet-stream"
        return _send(h, 200, data, {"Content-Type": kind, "ETag": etag})


def _send(h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]) -> int:
    try:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        if status != 304:
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if status != 304 and body:
            h.wfile.write(body)
    except (BrokenPipeError, ConnectionResetError):
        pass
    return status


def _drip(h: BaseHTTPRequestHandler, route: Route) -> int:
    """The answer with one byte of its body (and head, with `drip_head`) every `route.drip` seconds,
    until done or the client leaves."""
    head = (f"HTTP/1.1 {route.status} OK\r\nContent-Type: {route.content_type}\r\n"
            f"Content-Length: {len(route.body)}\r\n\r\n").encode()
    data, start = head + route.body, 0 if route.drip_head else len(head)
    try:
        h.wfile.write(data[:start])
        for i in range(start, len(data)):
            h.wfile.write(data[i:i + 1])
            h.wfile.flush()
            time.sleep(route.drip)
    except OSError:
        pass
    h.close_connection = True
    return route.status
