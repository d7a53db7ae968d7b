"""Interrupts held while a process pool forks its workers.

A handler that raises (the CLI's Ctrl-C and SIGTERM do) would otherwise run inside one of the fork hooks
Python calls itself (logging's lock release), where its exception is printed as "Exception ignored" and
lost. The pool forks inside `interrupts_held`; a handler asks `hold_interrupt` first, and the signal is
raised again right after, in our own code. (Blocking the signals would not do: a process-directed signal
goes to another thread that has them unblocked, and its Python handler still runs in the main thread.)
Standard library only: the CLI imports this at start-up.
"""
from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

# How long the main thread waits at most before it wakes: a process-directed signal may be handed to any
# thread, and CPython runs its Python handler only when the main thread next wakes, which an untimed wait
# (a lock, an Event, a future) does not. The CLI's process pool and the bot's Socket Mode wait in steps
# this long, not in one untimed wait.
SIGNAL_POLL_SECONDS = 0.5

_holding = False  # a pool is forking its workers
_pending: list[int] = []  # the interrupts that came meanwhile


@contextmanager
def interrupts_held() -> Iterator[None]:
    """While a pool forks its workers, an interrupt is kept and raised again right after."""
    global _holding
    _holding = True
    try:
        yield
    finally:
        _holding = False
        if _pending:
            signum = _pending[-1]
            _pending.clear()
            signal.raise_signal(signum)  # its handler runs now, in our own code


def hold_interrupt(signum: int) -> bool:
    """True when a pool is forking: the signal is kept and raised again once it has forked."""
    if _holding:
        _pending.append(signum)
    return _holding


def release_in_child() -> None:
    """In a process forked inside `interrupts_held`: nothing is held there."""
    global _holding
    _holding = False
    _pending.clear()
