"""Locks on cached job folders: a job is never evicted, nor rewritten, while it is fetched or used.

Two flock(2) lock files per job folder, kept in `<cache>/.locks/` (outside the folder, so that
removing a folder never removes a lock file someone is about to lock through the folder):

- `<name>.use`: held *shared* by every fetch and every user of the folder, from the start of the
  fetch until the triage service is done parsing it (`JobLease`); *exclusive* only by eviction,
  which never waits for it: a folder it cannot lock at once is in use, and is skipped.
- `<name>.write`: held *exclusive* while a fetch writes the folder, *shared* while it is used.
  A fetch that finds the folder in use by another request (or being fetched by one) waits for
  any writer, then uses the folder as it is when that fetch finished it (it was revalidated
  moments ago): two users asking for the same job do not wait for each other's parsing.

flock locks belong to an open file, so they hold between the threads of the bot (every lock
opens its own file) and between processes (the CLI and the bot sharing a cache). The evictor
removes the lock files of the folders it removes; a waiter that then holds a lock on a removed
file notices (the path no longer names the file it locked) and locks again.
"""
from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from engine.ingest import JobError

LOCKS = ".locks"
POLL = 0.05  # seconds between tries while waiting for a lock


class _Lock:
    """One flock on one lock file, through a file descriptor of its own."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd: int | None = fd

    def downgrade(self) -> None:
        """Exclusive → shared (done by the kernel without letting another exclusive lock in)."""
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_SH)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor of the open file drops the lock
            self.fd = None


def _lock(path: Path, mode: int, deadline: float | None) -> _Lock | None:
    """Lock `path` (created when missing) in `mode`: waiting until `deadline` (monotonic time;
    None: do not wait). None when it is still held by others then."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if deadline is None or time.monotonic() >= deadline:
                        os.close(fd)
                        return None
                    time.sleep(POLL)
            held, now = os.fstat(fd), _stat(path)
        except BaseException:
            os.close(fd)
            raise
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return _Lock(path, fd)
        os.close(fd)  # the evictor removed this lock file meanwhile: lock the one there now


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None


def lock_paths(root: Path, name: str) -> tuple[Path, Path]:
    """The use and write lock files of the job folder `root/name`."""
    return root / LOCKS / f"{name}.use", root / LOCKS / f"{name}.write"


class JobLease:
    """A hold on one job folder: while held, it is neither evicted nor rewritten by another fetch.

    `writing` is True when the holder must (re)fetch the folder, then call `written()`; False
    when the folder is used as it is. A lease on a folder outside the cache holds nothing.
    Release it (or use it as a context manager) once the job has been parsed."""

    def __init__(self, path: Path, locks: list[_Lock] | None = None, writing: bool = False,
                 confine: Path | None = None) -> None:
        self.path = path
        self.confine = confine  # the log root or cache the folder lies in: nothing outside it is read
        self.writing = writing
        self._locks = locks or []

    def written(self) -> None:
        """The fetch is complete: from now on others may use the folder alongside."""
        if self.writing and len(self._locks) == 2:
            self._locks[1].downgrade()
        self.writing = False

    def release(self) -> None:
        """Let go (idempotent). The folder may be evicted from now on."""
        locks, self._locks = self._locks, []
        for lock in reversed(locks):
            lock.release()
        if locks and not self.path.exists():
            discard_locks(self.path.parent, self.path.name)  # a job that was never fetched

    def __enter__(self) -> JobLease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:  # a forgotten lease must not keep a folder locked forever
        for lock in self._locks:
            lock.release()


def hold(root: Path, name: str, complete: Callable[[], bool], deadline: float) -> JobLease:
    """A lease on the job folder `root/name`, for fetching it (`writing`) or using it as it is.

    The folder is used as it is when another request holds it and `complete()` says its last
    fetch finished. JobError when the folder stays busy until `deadline` (monotonic time)."""
    use_path, write_path = lock_paths(root, name)
    use = _lock(use_path, fcntl.LOCK_SH, deadline)  # waits only while an eviction removes it
    if use is None:
        raise _busy(name)
    try:
        while True:
            write = _lock(write_path, fcntl.LOCK_EX, None)
            if write is not None:
                return JobLease(root / name, [use, write], writing=True, confine=root)
            write = _lock(write_path, fcntl.LOCK_SH, deadline)  # waits for a fetch in progress
            if write is None:
                raise _busy(name)
            if complete():
                return JobLease(root / name, [use, write], writing=False, confine=root)
            write.release()  # that fetch failed half-way: fetch it here
            if time.monotonic() >= deadline:
                raise _busy(name)
            time.sleep(POLL)
    except BaseException:
        use.release()
        raise


def try_exclusive(root: Path, name: str) -> _Lock | None:
    """The use lock of `root/name` held exclusively, or None at once when anyone holds it."""
    return _lock(lock_paths(root, name)[0], fcntl.LOCK_EX, None)


def remove_locked(lock: _Lock, root: Path, name: str) -> None:
    """Remove the lock files of `root/name` while `lock` (its exclusive use lock) is held; release."""
    use_path, write_path = lock_paths(root, name)
    write_path.unlink(missing_ok=True)  # nobody holds it: every writer holds the use lock first
    use_path.unlink(missing_ok=True)
    lock.release()


def discard_locks(root: Path, name: str) -> None:
    """Remove the lock files of `root/name` when nobody holds them (after a fetch that failed)."""
    lock = try_exclusive(root, name)
    if lock is not None:
        if (root / name).exists():
            lock.release()
        else:
            remove_locked(lock, root, name)


def _busy(name: str) -> JobError:
    return JobError(f"job folder {name[:80]} is busy (being fetched by another request); try again shortly")
