"""The local cache of remote jobs: one job folder per remote job, files revalidated by URL + ETag,
whole jobs evicted least-recently-used first when the cache passes its size cap.

Layout (the engine reads a cached job like any job folder; it skips hidden files):

    <cache>/<job_id>-<hash of the job's source URL>/
        job.json, <node>/<rank file>...     as listed by the source
        .l4cache.json                       per file: hash of its URL, ETag/Last-Modified, sizes
        .l4cache.writing                    present while a fetch writes the folder (or when it failed)
    <cache>/.locks/<folder>.use, .write     who fetches and uses which folder (see `locks`)

A cached file is used again only for the same URL, and only after the source confirms its ETag
(HTTP 304, or the same ETag from an object store). Sizes count the bytes on disk. A folder is
fetched and used under a `locks.JobLease`; eviction skips every folder someone holds.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from bot.config import Settings
from bot.sources import locks

log = logging.getLogger("l4.sources")
INDEX = ".l4cache.json"
WRITING = ".l4cache.writing"
PART = ".part-"  # prefix of files being downloaded (fetch.Fetcher.download, logroot)


def cache_root(settings: Settings) -> Path:
    base = Path(settings.cache_dir) if settings.cache_dir else Path.home() / ".cache" / "l4"
    return base / "remote-jobs"


def url_key(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8")).hexdigest()


@dataclass
class Entry:
    etag: str | None
    last_modified: str | None
    size: int
    expanded: int


class CachedJob:
    """One remote job's folder in the cache and its index."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads((path / INDEX).read_text(encoding="utf-8"))
            self.files: dict[str, dict] = data.get("files", {}) if isinstance(data, dict) else {}
        except (OSError, ValueError):
            self.files = {}

    def lookup(self, rel: str, url: str) -> Entry | None:
        """The cached entry of `rel` if it was fetched from `url` and is still on disk."""
        meta = self.files.get(rel)
        if not isinstance(meta, dict) or meta.get("key") != url_key(url) or not (self.path / rel).is_file():
            return None
        return Entry(meta.get("etag"), meta.get("last_modified"), int(meta.get("size", 0)),
                     int(meta.get("expanded", 0)))

    def store(self, rel: str, url: str, entry: Entry) -> None:
        self.files[rel] = {"key": url_key(url), "etag": entry.etag, "last_modified": entry.last_modified,
                           "size": entry.size, "expanded": entry.expanded}

    def begin(self) -> None:
        """Mark the folder as being written (until `finish`): a failed fetch leaves it incomplete."""
        (self.path / WRITING).touch()

    def finish(self, keep: set[str]) -> None:
        """Drop files the source no longer lists, write the index, mark the job as just used and
        complete. Part files (`.part-*`) are never touched: they are someone's download."""
        for rel in list(self.files):
            if rel not in keep:
                self.files.pop(rel)
        for f in sorted(self.path.rglob("*"), reverse=True):
            rel = f.relative_to(self.path).as_posix()
            spared = rel in (INDEX, WRITING) or rel in keep or f.name.startswith(PART)
            if f.is_file() and not spared:
                f.unlink(missing_ok=True)
            elif f.is_dir() and not any(f.iterdir()):
                f.rmdir()
        tmp = self.path / f".{INDEX}.{uuid.uuid4().hex[:12]}"
        tmp.write_text(json.dumps({"files": self.files}, indent=1), encoding="utf-8")
        os.replace(tmp, self.path / INDEX)
        (self.path / WRITING).unlink(missing_ok=True)


def complete(folder: Path) -> bool:
    """True when the last fetch of `folder` finished (its index written, not marked as writing)."""
    return (folder / INDEX).is_file() and not (folder / WRITING).exists()


class JobCache:
    """All cached jobs under `root`, at most `max_bytes` on disk (beyond the jobs in use)."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root
        self.max_bytes = max_bytes

    @staticmethod
    def folder_name(source_url: str, job_id: str) -> str:
        return f"{job_id}-{url_key(source_url)[:16]}"

    def job(self, source_url: str, job_id: str) -> CachedJob:
        """The folder of a job (created); fetch it only under a lease from `hold` that is `writing`."""
        return CachedJob(self.root / self.folder_name(source_url, job_id))

    def hold(self, source_url: str, job_id: str, deadline: float) -> locks.JobLease:
        """A lease on the job's folder: to fetch it (`lease.writing`), or to use it as it is when
        another request holds it, complete. Waits for a fetch in progress until `deadline`."""
        name = self.folder_name(source_url, job_id)
        return locks.hold(self.root, name, lambda: complete(self.root / name), deadline)

    def evict(self, keep: Path | None = None) -> list[Path]:
        """Remove least-recently-used jobs until the cache fits its cap; the removed. Jobs being
        fetched or used (leased, by any thread or process) are never removed, nor is `keep`."""
        if not self.root.is_dir():
            return []
        evicting = locks.try_exclusive(self.root, ".evict")
        if evicting is None:
            return []  # another worker is evicting right now
        try:
            return self._evict(keep)
        finally:
            evicting.release()

    def _evict(self, keep: Path | None) -> list[Path]:
        jobs = []
        for d in self.root.iterdir():
            if d.is_dir() and not d.name.startswith("."):
                jobs.append((_last_used(d), _size(d), d))
        total = sum(size for _, size, _ in jobs)
        removed: list[Path] = []
        for _, size, d in sorted(jobs, key=lambda j: j[0]):
            if total <= self.max_bytes:
                break
            if keep is not None and d.resolve() == keep.resolve():
                continue
            held = locks.try_exclusive(self.root, d.name)
            if held is None:
                continue  # fetched or used right now
            shutil.rmtree(d, ignore_errors=True)
            locks.remove_locked(held, self.root, d.name)
            total -= size
            removed.append(d)
            log.info("cache: evicted %s (%d bytes)", d.name, size)
        return removed


def _last_used(d: Path) -> float:
    try:
        return (d / INDEX).stat().st_mtime
    except OSError:
        return 0.0


def _size(d: Path) -> int:
    """Bytes on disk under `d`; files and folders may come and go meanwhile (a fetch in progress)."""
    total = 0
    for top, _dirs, files in os.walk(d):
        for name in files:
            try:
                total += os.stat(os.path.join(top, name)).st_size
            except OSError:
                pass
    return total

