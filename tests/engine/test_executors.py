"""The process pool's workers start with nothing of the parent's interrupt hold (engine.interrupts)."""

import os
import signal
import subprocess
import sys
from pathlib import Path

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


_SIGNAL_WHILE_A_WORKER_PARSES = """
import signal, sys, threading, time
from engine.executors import PoolExecutor
def slow(seconds):
    time.sleep(seconds)
    return seconds
def stop(signum, frame):
    raise KeyboardInterrupt
signal.signal(signal.SIGTERM, stop)
def send():
    time.sleep(1.0)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)  # this thread takes it, as the kernel may
threading.Thread(target=send, daemon=True).start()
started = time.monotonic()
try:
    list(PoolExecutor(2).map(slow, [60, 60]))
except KeyboardInterrupt:
    print(f"stopped {time.monotonic() - started:.1f}")
"""


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_a_signal_another_thread_receives_stops_the_pool_at_once() -> None:
    """The parent waits for a worker's result in half-second steps: a SIGTERM the kernel hands to another
    thread (the pool's own management thread, say) stops it within a step, not when the file in hand is
    parsed (an untimed wait sat out the 60 s)."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _SIGNAL_WHILE_A_WORKER_PARSES], cwd=root,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert done.stdout.startswith("stopped"), done.stderr[-2000:]
    assert float(done.stdout.split()[1]) < 15, done.stdout
