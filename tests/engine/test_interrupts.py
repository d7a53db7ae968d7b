"""Interrupts held while a pool forks: one that comes meanwhile is kept and raised right after, in our own
code, not inside the fork hooks Python runs (where its exception would be printed and lost)."""

import os
import signal
import time

import pytest

from engine import interrupts
from engine.interrupts import hold_interrupt, interrupts_held


class Stopped(Exception):
    pass


def _handler(signum: int, frame: object) -> None:  # as the CLI's handlers (bot.cli) do
    if hold_interrupt(signum):
        return
    raise Stopped()


def _deliver(signum: int) -> None:
    os.kill(os.getpid(), signum)
    deadline = time.monotonic() + 5
    while not interrupts._pending and time.monotonic() < deadline:  # the handler runs in the main thread
        time.sleep(0.01)


def test_an_interrupt_while_held_lands_right_after_not_inside() -> None:
    before = signal.signal(signal.SIGTERM, _handler)
    reached_end = False
    try:
        with pytest.raises(Stopped):
            with interrupts_held():
                _deliver(signal.SIGTERM)
                reached_end = True
        assert reached_end
    finally:
        signal.signal(signal.SIGTERM, before)


def test_outside_a_fork_an_interrupt_is_not_held() -> None:
    before = signal.signal(signal.SIGTERM, _handler)
    try:
        with pytest.raises(Stopped):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    finally:
        signal.signal(signal.SIGTERM, before)
