"""A WSGI server whose connections are bounded: in number, in idle time and in time per request.

wsgiref's threaded server gives each connection a thread at once and waits on it forever, so idle
clients hold threads (300 idle connections: 300 threads). Here one watcher thread holds every
connection that has not sent a byte yet (a selector, no thread each) and closes those idle for
longer than `idle_timeout`; a connection that sends goes to a fixed pool of worker threads, where
each read may wait `read_timeout` and the whole request `request_deadline` (past it, the watcher
shuts the socket, which ends any blocked read). Connections beyond `max_connections` are answered
503 and closed at once.
"""
from __future__ import annotations

import logging
import queue
import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from bot.config import _positive  # the settings' own check: a positive number, or ConfigError

log = logging.getLogger("l4.http")
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n"
        b"Connection: close\r\nRetry-After: 1\r\n\r\ntoo many connections\n")


@dataclass(frozen=True)
class HttpLimits:
    max_connections: int = 64  # open connections at once (idle and in progress)
    workers: int = 8  # requests handled at once (threads)
    idle_timeout: float = 10.0  # seconds a connection may stay open before sending its request
    read_timeout: float = 10.0  # seconds one read of a request may wait
    request_deadline: float = 30.0  # seconds to receive a request and answer it

    @classmethod
    def from_env(cls) -> HttpLimits:
        """L4_HTTP_MAX_CONNECTIONS, L4_HTTP_WORKERS, L4_HTTP_IDLE_TIMEOUT, L4_HTTP_READ_TIMEOUT,
        L4_HTTP_REQUEST_DEADLINE (ConfigError when one is not a positive number)."""
        d = cls()
        return cls(max_connections=int(_positive("L4_HTTP_MAX_CONNECTIONS", d.max_connections)),
                   workers=int(_positive("L4_HTTP_WORKERS", d.workers)),
                   idle_timeout=_positive("L4_HTTP_IDLE_TIMEOUT", d.idle_timeout, float),
                   read_timeout=_positive("L4_HTTP_READ_TIMEOUT", d.read_timeout, float),
                   request_deadline=_positive("L4_HTTP_REQUEST_DEADLINE", d.request_deadline, float))


class BoundedWSGIServer(WSGIServer):
    """wsgiref's WSGIServer, with `serve_forever` only accepting: see the module's docstring."""

    request_queue_size = 128  # the listen backlog: a burst of connections waits to be accepted

    def __init__(self, address: tuple[str, int], handler: type[WSGIRequestHandler],
                 limits: HttpLimits) -> None:
        super().__init__(address, handler)
        self.limits = limits
        self._lock = threading.Lock()
        self._idle: dict[socket.socket, tuple[object, float]] = {}  # -> (client address, since)
        self._busy: dict[socket.socket, float] = {}  # -> started
        self._incoming: queue.SimpleQueue[tuple[socket.socket, object]] = queue.SimpleQueue()
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._pool = ThreadPoolExecutor(max_workers=limits.workers, thread_name_prefix="l4-http")
        self._closing = False
        self._refused = 0
        self._watcher = threading.Thread(target=self._watch, name="l4-http-watcher", daemon=True)
        self._watcher.start()

    def open_connections(self) -> int:
        with self._lock:
            return len(self._idle) + len(self._busy)

    # -- accepting (the serve_forever thread) ------------------------------------------------------
    def process_request(self, request: socket.socket, client_address: object) -> None:  # type: ignore[override]
        if self._closing or self.open_connections() >= self.limits.max_connections:
            self._refuse(request)
            return
        with self._lock:
            self._idle[request] = (client_address, time.monotonic())
        self._incoming.put((request, client_address))
        self._wake()

    def _refuse(self, request: socket.socket) -> None:
        self._refused += 1
        if self._refused == 1 or self._refused % 100 == 0:
            log.warning("HTTP: %d connection(s) refused: more than L4_HTTP_MAX_CONNECTIONS (%d) open",
                        self._refused, self.limits.max_connections)
        try:
            request.setblocking(False)
            request.send(BUSY)
        except OSError:
            pass
        self.shutdown_request(request)

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except OSError:  # closed, or its buffer full: the watcher wakes anyway
            pass

    # -- watching (one thread) ---------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._closing:
            for key, _ in self._selector.select(timeout=self._next_check()):
                if key.fileobj is self._wake_r:
                    self._drain_wake()
                    continue
                sock = key.fileobj
                self._selector.unregister(sock)
                with self._lock:
                    held = self._idle.pop(sock, None)  # type: ignore[call-overload]
                    if held is None or self._closing:
                        continue  # closed meanwhile
                    self._busy[sock] = time.monotonic()  # type: ignore[index]
                self._pool.submit(self._handle, sock, held[0])
            while True:
                try:
                    sock, _addr = self._incoming.get_nowait()
                except queue.Empty:
                    break
                try:
                    self._selector.register(sock, selectors.EVENT_READ)
                except (ValueError, OSError):  # closed meanwhile
                    with self._lock:
                        self._idle.pop(sock, None)
            self._expire()

    def _next_check(self) -> float:
        return min(1.0, self.limits.idle_timeout / 2, self.limits.request_deadline / 2)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _expire(self) -> None:
        now = time.monotonic()
        with self._lock:
            idle = [s for s, (_a, since) in self._idle.items() if now - since > self.limits.idle_timeout]
            late = [s for s, started in self._busy.items() if now - started > self.limits.request_deadline]
            for sock in idle:
                self._idle.pop(sock, None)
        for sock in idle:
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            self.shutdown_request(sock)
        if idle:
            log.info("HTTP: closed %d connection(s) idle for more than %g s", len(idle),
                     self.limits.idle_timeout)
        for sock in late:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # ends the worker's blocked read or write
            except OSError:
                pass

    # -- handling (the worker pool) ----------------------------------------------------------------
    def _handle(self, sock: socket.socket, address: object) -> None:
        try:
            sock.setblocking(True)
            sock.settimeout(self.limits.read_timeout)
            self.finish_request(sock, address)
        except OSError as exc:  # a timeout or a client that went away: one line, no trace
            log.info("HTTP: request from %s not completed: %s", _host(address), exc.__class__.__name__)
        except Exception:  # noqa: BLE001 - the server goes on; the trace is in the log
            log.exception("HTTP: request from %s failed", _host(address))
        finally:
            with self._lock:
                self._busy.pop(sock, None)
            self.shutdown_request(sock)

    def server_close(self) -> None:
        self._closing = True
        self._wake()
        self._watcher.join(timeout=5)
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            socks = list(self._idle) + list(self._busy)
            self._idle.clear()
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        while True:
            try:
                self.shutdown_request(self._incoming.get_nowait()[0])
            except queue.Empty:
                break
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()
        super().server_close()


def _host(address: object) -> str:
    return str(address[0]) if isinstance(address, tuple) and address else "?"
