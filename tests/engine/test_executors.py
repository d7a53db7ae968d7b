"""The process pool's signal handling: interrupts are held while it forks, and its workers start with them
no longer held."""

import os
import signal

import pytest

from engine.executors import PoolExecutor, interrupts_held


class Stopped(Exception):
    pass


def _raise(signum: int, frame: object) -> None:
    raise Stopped()


def _held_in_worker(_: int) -> bool:
    return bool(signal.pthread_sigmask(signal.SIG_BLOCK, set()) & {signal.SIGINT, signal.SIGTERM})


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="needs pthread_sigmask")
def test_an_interrupt_while_held_lands_right_after_not_inside() -> None:
    before = signal.signal(signal.SIGTERM, _raise)
    reached_end = False
    try:
        with pytest.raises(Stopped):
            with interrupts_held():
                os.kill(os.getpid(), signal.SIGTERM)  # pending: no handler runs inside the block
                reached_end = True
        assert reached_end
        assert not signal.pthread_sigmask(signal.SIG_BLOCK, set()) & {signal.SIGTERM, signal.SIGINT}
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "pthread_sigmask"),
                    reason="needs a forked process pool")
def test_pool_workers_do_not_keep_the_interrupts_held() -> None:
    assert list(PoolExecutor(2).map(_held_in_worker, range(4))) == [False] * 4
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, set()) & {signal.SIGTERM, signal.SIGINT}
