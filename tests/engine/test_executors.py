"""The process pool's workers start with nothing of the parent's interrupt hold (engine.interrupts)."""

import os
import signal

import pytest

from engine import interrupts
from engine.executors import PoolExecutor
from engine.interrupts import hold_interrupt


def _holding_in_worker(_: int) -> bool:
    return interrupts._holding


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs a forked process pool")
def test_pool_workers_do_not_inherit_the_hold() -> None:
    assert list(PoolExecutor(2).map(_holding_in_worker, range(4))) == [False] * 4
    assert hold_interrupt(signal.SIGTERM) is False
