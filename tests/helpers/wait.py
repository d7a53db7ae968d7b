"""Waiting in tests: on a condition, never for a fixed time, with one generous deadline.

A test that waits for something (a Slack call, a summary, a server's first request, a subprocess'
start) polls a condition and goes on the moment it holds, so the deadline costs nothing when the
test passes; it only bounds how long a broken test hangs. The deadline is the same everywhere,
``WAIT`` seconds (``L4_TEST_WAIT_SECONDS``, default 600): long enough for a 2-core machine under a
load average of 30 (where one bot analysis took minutes), short enough for a hung test to end.

    from tests.helpers.wait import wait_for
    port = wait_for(lambda: srv.port_if_listening(), what="the server to listen")
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

WAIT = float(os.environ.get("L4_TEST_WAIT_SECONDS") or 600.0)
POLL = 0.05  # seconds between two looks at the condition


def wait_for(predicate: Callable[[], T], timeout: float = WAIT, what: str = "the condition",
             interval: float = POLL) -> T:
    """Poll ``predicate()`` until it returns something true and return that, or raise TimeoutError
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = predicate()
        if got:
            return got
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
