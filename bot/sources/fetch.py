"""Guarded HTTP(S) fetching: allowlisted hosts, pinned addresses, manual redirects, byte and time
limits, a progress callback, and errors that are one safe line.

One `Fetcher` serves one job resolution; its `Budget` counts bytes and time over all requests.
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from bot.config import Settings
from bot.sources.netguard import AddressPolicy, PinnedTransport, Refused, host_allowed, safe_url
from bot.sources.tls import tls_problem
from engine.ingest import JobError

log = logging.getLogger("l4.sources")

Progress = Callable[[int, "int | None"], None]
MAX_REDIRECTS = 5
REDIRECTS = (301, 302, 303, 307, 308)
CHUNK = 256 * 1024


@dataclass
class Budget:
    """Bytes and time one job resolution may spend; reports progress as bytes arrive."""

    max_bytes: int
    time_limit: float
    timeout: float
    progress: Progress | None = None
    done: int = 0  # bytes received
    total: int | None = None  # bytes expected, when known
    expanded: int = 0  # bytes of logs once decompressed (fetched and cached files)
    started: float = 0.0

    def __post_init__(self) -> None:
        self.started = self.started or time.monotonic()

    @classmethod
    def from_settings(cls, settings: Settings, progress: Progress | None = None) -> Budget:
        return cls(settings.fetch_max_bytes, settings.fetch_time_limit, settings.fetch_timeout, progress)

    def remaining(self) -> float:
        return self.time_limit - (time.monotonic() - self.started)

    def check_time(self, what: str) -> None:
        if self.remaining() <= 0:
            raise JobError(f"timed out: {what} took longer than the {self.time_limit:g} s limit "
                           "(L4_FETCH_TIME_LIMIT)")

    def request_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(max(0.05, min(self.timeout, self.remaining())))

    def add(self, n: int, what: str) -> None:
        self.done += n
        if self.done > self.max_bytes:
            raise JobError(f"refused: {what} passes the {self.max_bytes:,}-byte limit (L4_FETCH_MAX_BYTES)")
        self.check_time(what)
        if self.progress is not None:
            self.progress(self.done, self.total)

    def add_expanded(self, n: int, what: str) -> None:
        self.expanded += n
        if self.expanded > self.max_bytes:
            raise JobError(f"refused: {what} passes the {self.max_bytes:,}-byte limit of logs per job "
                           "(L4_FETCH_MAX_BYTES)")


@dataclass
class Download:
    status: str  # "fetched" | "not-modified" | "missing"
    etag: str | None = None
    last_modified: str | None = None
    size: int = 0


class Fetcher:
    """GETs over the guarded transport. Use as a context manager (closes its connections)."""

    def __init__(self, settings: Settings, budget: Budget) -> None:
        self.settings = settings
        self.budget = budget
        self.client = httpx.Client(
            transport=PinnedTransport(AddressPolicy(settings), remaining=budget.remaining),
            follow_redirects=False,
            trust_env=False,
            headers={"User-Agent": "l4-log-fetcher", "Accept-Encoding": "identity"},
        )

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def check_url(self, url: str | httpx.URL, base: httpx.URL | None = None) -> httpx.URL:
        """`url` parsed (relative to `base`, a redirect's), if it is http(s) to an allowlisted host
        and a valid port; else Refused."""
        try:
            parsed = base.join(str(url)) if base is not None else httpx.URL(str(url))
            port = parsed.port
            parsed.host  # noqa: B018 - decoding an IDNA host can fail (an invalid xn-- label)
        except (httpx.InvalidURL, ValueError):  # UnicodeError (IDNA) is a ValueError
            raise Refused(f"refused: not a valid link: {safe_url(str(url))}") from None
        if port is not None and not 0 < port < 65536:
            raise Refused(f"refused: not a valid link (port {port}): {safe_url(str(url))}")
        if parsed.scheme not in ("http", "https"):
            raise Refused(f"refused: {parsed.scheme or 'this'}:// links are not fetched (only http(s))")
        if not parsed.host or not host_allowed(parsed.host, self.settings):
            raise Refused(f"refused: host {parsed.host[:80] or '(none)'} is not in L4_REPORT_HOSTS")
        return parsed

    @contextmanager
    def open(self, url: str, headers: dict[str, str] | None = None) -> Iterator[httpx.Response]:
        """The response to GET `url` (body not read yet), after following at most 5 redirects, each
        hop checked like the link itself; a redirect from https to http is refused. Statuses other
        than 2xx/304/404 raise JobError."""
        current = self.check_url(url)
        shown = safe_url(url)
        for _hop in range(MAX_REDIRECTS + 1):
            self.budget.check_time(f"fetching {shown}")
            request = self.client.build_request("GET", current, headers=headers,
                                                timeout=self.budget.request_timeout())
            response = self._send(request, shown)
            if response.status_code in REDIRECTS:
                location = response.headers.get("location", "")
                response.close()
                if not location:
                    raise JobError(f"{shown} answered a redirect without a location")
                target = self.check_url(location, base=current)
                if current.scheme == "https" and target.scheme == "http":
                    raise Refused(f"refused: {shown} redirects from https to http ({safe_url(target)}); "
                                  "a downgrade is not followed")
                current = target
                log.info("redirect from %s to %s", shown, safe_url(current))
                continue
            try:
                if response.status_code not in (200, 203, 304, 404) and not response.is_success:
                    raise JobError(f"{shown} answered HTTP {response.status_code}")
                encoding = response.headers.get("content-encoding", "identity").strip().lower()
                if encoding not in ("", "identity"):
                    raise JobError(f"{shown}: the server sent Content-Encoding {encoding[:20]} although "
                                   "identity was asked; serve .gz/.zst files as they are")
                yield response
            finally:
                response.close()
            return
        raise JobError(f"{shown}: more than {MAX_REDIRECTS} redirects")

    def _send(self, request: httpx.Request, shown: str) -> httpx.Response:
        try:
            return self.client.send(request, stream=True)
        except httpx.TimeoutException:
            raise self._timed_out(shown) from None
        except httpx.HTTPError as exc:
            raise JobError(f"cannot fetch {shown}: {_reason(exc)}") from None
        except JobError:
            raise  # refused by the guarded transport (a ValueError too)
        except ValueError:  # httpx building the next request from an invalid Location (IDNA...)
            raise JobError(f"cannot fetch {shown}: it redirects to an invalid URL") from None

    def _timed_out(self, shown: str) -> JobError:
        if self.budget.remaining() <= 0.01:  # the deadline of the whole resolution, on the wall clock
            return JobError(f"timed out: fetching {shown} took longer than the {self.budget.time_limit:g} s "
                            "limit (L4_FETCH_TIME_LIMIT)")
        return JobError(f"timed out fetching {shown} (L4_FETCH_TIMEOUT {self.budget.timeout:g} s)")

    def _chunks(self, response: httpx.Response, shown: str) -> Iterator[bytes]:
        try:
            for chunk in response.iter_raw(CHUNK):
                self.budget.add(len(chunk), f"fetching {shown}")
                yield chunk
        except httpx.TimeoutException:
            raise self._timed_out(shown) from None
        except httpx.HTTPError as exc:
            raise JobError(f"cannot fetch {shown}: {_reason(exc)}") from None

    def get_bytes(self, url: str, max_bytes: int, accept: str = "*/*") -> tuple[bytes | None, str]:
        """The body of `url` (None when 404) and its content type; at most `max_bytes`."""
        shown = safe_url(url)
        with self.open(url, {"Accept": accept}) as response:
            if response.status_code == 404:
                return None, ""
            _check_length(response, max_bytes, shown, f"the {max_bytes:,} bytes allowed")
            body = bytearray()
            for chunk in self._chunks(response, shown):
                body += chunk
                if len(body) > max_bytes:
                    raise JobError(f"refused: {shown} is more than the {max_bytes:,} bytes allowed")
            return bytes(body), response.headers.get("content-type", "")

    def download(self, url: str, dest: Path, *, etag: str | None = None, last_modified: str | None = None,
                 verify: Callable[[Path], object] | None = None) -> Download:
        """Save `url` as `dest` (atomically: a hidden part file, renamed once complete and passed by
        `verify`). With a validator from the cache, a 304 answer leaves `dest` as it is."""
        shown = safe_url(url)
        headers: dict[str, str] = {}
        if etag:
            headers["If-None-Match"] = etag
        elif last_modified:
            headers["If-Modified-Since"] = last_modified
        with self.open(url, headers) as response:
            if response.status_code == 404:
                return Download("missing")
            if response.status_code == 304:
                return Download("not-modified", etag, last_modified)
            left = self.budget.max_bytes - self.budget.done
            _check_length(response, left, shown, f"the {left:,} bytes left (L4_FETCH_MAX_BYTES)")
            dest.parent.mkdir(parents=True, exist_ok=True)
            part = dest.with_name(f".part-{uuid.uuid4().hex[:12]}-{dest.name}")
            size = 0
            try:
                with open(part, "wb") as fh:
                    for chunk in self._chunks(response, shown):
                        fh.write(chunk)
                        size += len(chunk)
                if verify is not None:
                    verify(part)
                os.replace(part, dest)
            finally:
                part.unlink(missing_ok=True)
            return Download("fetched", response.headers.get("etag"), response.headers.get("last-modified"),
                            size)


def _check_length(response: httpx.Response, limit: int, shown: str, what: str) -> None:
    raw = response.headers.get("content-length", "")
    if raw.isdigit() and int(raw) > limit:
        raise JobError(f"refused: {shown} is {int(raw):,} bytes, more than {what}")


def _reason(exc: httpx.HTTPError) -> str:
    """A cause without addresses or URLs: the TLS problem, or only the exception's kind."""
    problem = tls_problem(exc)
    if problem is not None:
        return problem
    if isinstance(exc, httpx.ConnectError):
        return "connection failed"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the server broke the HTTP protocol"
    return exc.__class__.__name__
