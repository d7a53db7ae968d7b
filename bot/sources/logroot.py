"""Log roots (`L4_LOG_ROOT`) and log locations given by failure reports → a local job folder.

- a local path or `file://` URL: the job folder is `<root>/<job_id>` itself (nothing copied);
- `http(s)://`: the job's files are listed (`listing`) and downloaded with the guarded fetcher into
  the cache (`cache`), .gz/.zst kept compressed after passing the bomb caps (`decompress`);
- any other fsspec URL (`s3://`, `gs://`, `memory://`...): listed with fsspec and streamed into the
  cache the same way; `s3://` and `gs://` need the `s3`/`gcs` extras.

A log location from a report is attacker-influenced: an http(s) one passes the same host and
address checks as the link, anything else must lie inside L4_LOG_ROOT.

Every function here gives a `JobLease` on the job folder: a cached folder is fetched and then
used under it (not evicted, not rewritten by another request) until the caller releases it.
"""
from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

import httpx

from bot.config import Settings
from bot.sources.cache import CachedJob, Entry, JobCache, cache_root
from bot.sources.decompress import expanded_size
from bot.sources.fetch import Budget, Fetcher
from bot.sources.listing import MAX_DEPTH, MAX_FILES, RemoteFile, list_http_job, safe_segment
from bot.sources.locks import JobLease
from bot.sources.netguard import Refused, safe_url
from engine.ingest import JobError

BAD_LOCATION = "the report's log location is not a valid URL"
FSSPEC_EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}
READ_STEP = 1 << 20


def root_kind(root: str) -> str:
    """'local' (a path or file://), 'http' (http/https) or 'fsspec' (any other URL scheme)."""
    if "://" not in root:
        return "local"
    scheme = root.split("://", 1)[0].lower()
    if scheme == "file":
        return "local"
    return "http" if scheme in ("http", "https") else "fsspec"


def local_base(root: str) -> Path:
    if root.lower().startswith("file://"):
        return Path(unquote(urlsplit(root).path))
    return Path(root)


def inside_links(path: Path, base: Path) -> bool:
    """True when `path`, every link followed, lies strictly inside `base` (links followed too)."""
    real, top = os.path.realpath(path), os.path.realpath(base)
    return real.startswith(top.rstrip(os.sep) + os.sep)


def job_from_root(rel: str, job_id: str, settings: Settings, budget: Budget) -> JobLease:
    """The job folder of `rel` (a job ID, or a safe relative path) under L4_LOG_ROOT, held."""
    root = settings.log_root
    kind = root_kind(root)
    if kind == "local":
        base = local_base(root)
        candidate = base / rel
        if candidate.is_dir():
            if not inside_links(candidate, base):
                raise Refused(f"refused: job '{job_id}' is a link to outside L4_LOG_ROOT; it is not read")
            return JobLease(candidate, confine=base)  # not in the cache: nothing to hold
        raise JobError(f"unknown job '{job_id}': no folder {job_id} here nor under L4_LOG_ROOT ({root})")
    missing = f"unknown job '{job_id}': not found under L4_LOG_ROOT ({safe_url(root)})"
    if kind == "http":
        base = root.rstrip("/") + "/" + "/".join(quote(s) for s in rel.split("/")) + "/"
        return fetch_http_job(base, job_id, settings, budget, missing)
    return fetch_fsspec_job(root.rstrip("/") + "/" + rel, job_id, settings, budget, missing)


def job_from_location(location: str, job_id: str, settings: Settings, budget: Budget) -> JobLease:
    """The job folder at a log location a failure report named, held."""
    location = location.strip()
    try:
        scheme = urlsplit(location).scheme.lower()
        url = httpx.URL(location) if scheme in ("http", "https") else None
        base = str(url.copy_with(fragment=None)).rstrip("/") + "/" if url is not None else ""
    except (ValueError, httpx.InvalidURL):
        raise JobError(BAD_LOCATION) from None
    if url is not None:
        if url.query:
            raise JobError(f"the report's log location {safe_url(location)} has a query string; "
                           "a folder URL is needed")
        return fetch_http_job(base, job_id, settings, budget,
                              f"no logs found for job '{job_id}' at {safe_url(location)}")
    rel = _inside_root(location, settings.log_root)
    if rel is None:
        raise Refused(f"refused: the report's log location {safe_url(location)} is outside L4_LOG_ROOT")
    return job_from_root(rel, job_id, settings, budget)


def _inside_root(location: str, root: str) -> str | None:
    """`location` relative to `root` as safe segments joined by '/', or None when outside. A
    location without a scheme that is not an absolute path is taken relative to the root."""
    try:
        return _relative(location, root)
    except ValueError:  # urlsplit: an invalid IPv6 literal...
        return None


def _relative(location: str, root: str) -> str | None:
    if not urlsplit(location).scheme and not location.startswith(("/", "\\")):
        parts: tuple[str, ...] = tuple(location.strip("/").split("/"))
    elif root_kind(root) == "local":
        if urlsplit(location).scheme not in ("", "file"):
            return None
        base = local_base(root).resolve()
        target = local_base(location).resolve()
        if not target.is_relative_to(base) or target == base:
            return None
        parts = target.relative_to(base).parts
    else:
        prefix = root.rstrip("/") + "/"
        if not location.startswith(prefix):
            return None
        parts = tuple(unquote(s) for s in location[len(prefix):].strip("/").split("/"))
    if not parts or not all(safe_segment(p) for p in parts):
        return None
    return "/".join(parts)


def _dest(job: CachedJob, rel: str) -> Path:
    """Where `rel` goes in the cached job: its folder must lie inside the job's, links followed. A
    link found at the file's own place (planted in the cache) is removed: the file is fetched anew."""
    dest = job.path / rel
    if dest.parent != job.path and not inside_links(dest.parent, job.path):
        raise JobError(f"unsafe file name in the job listing: {rel[:60]!r}")
    if dest.is_symlink():
        dest.unlink()
    return dest


def _verifier(settings: Settings, budget: Budget, rel: str, sizes: list[int]):
    def verify(part: Path) -> None:
        sizes.append(expanded_size(part, max_bytes=max(0, budget.max_bytes - budget.expanded),
                                   max_ratio=settings.max_decompress_ratio, display=rel))
    return verify


def _deadline(budget: Budget) -> float:
    return time.monotonic() + max(0.0, budget.remaining())


def fetch_http_job(base_url: str, job_id: str, settings: Settings, budget: Budget, missing: str) -> JobLease:
    """Download the job at `base_url` (ending in /) into the cache; its local folder, held."""
    cache = JobCache(cache_root(settings), settings.cache_max_bytes)
    with Fetcher(settings, budget) as fetcher:
        manifest, files = list_http_job(fetcher, base_url)
        if manifest is None and not files:
            raise JobError(missing)

        def fill(job: CachedJob) -> set[str]:
            keep: set[str] = set()
            if manifest is not None:
                _write(job.path / "job.json", manifest)
                keep.add("job.json")
            for remote in files:
                got = _fetch_http_file(fetcher, job, remote, settings, budget)
                if got is None and remote.fallback is not None:
                    got = _fetch_http_file(fetcher, job, RemoteFile(*remote.fallback), settings, budget)
                if got is not None:
                    keep.add(got)
            if len(keep - {"job.json"}) == 0:
                raise JobError(f"no log files found for job '{job_id}' at {safe_url(base_url)}")
            return keep

        return _fill_cached_job(cache, base_url, job_id, budget, fill)


def _fetch_http_file(fetcher: Fetcher, job: CachedJob, remote: RemoteFile, settings: Settings,
                     budget: Budget) -> str | None:
    """Fetch (or revalidate) one file; its rel path, or None when the server has no such file."""
    dest = _dest(job, remote.rel)
    cached = job.lookup(remote.rel, remote.url)
    sizes: list[int] = []
    got = fetcher.download(remote.url, dest, etag=cached.etag if cached else None,
                           last_modified=cached.last_modified if cached else None,
                           verify=_verifier(settings, budget, remote.rel, sizes))
    if got.status == "missing":
        return None
    if got.status == "not-modified" and cached is not None:
        entry = cached
    else:
        entry = Entry(got.etag, got.last_modified, got.size, sizes[0] if sizes else got.size)
    budget.add_expanded(entry.expanded, f"job '{job.path.name}'")
    job.store(remote.rel, remote.url, entry)
    return remote.rel


def fetch_fsspec_job(url: str, job_id: str, settings: Settings, budget: Budget, missing: str) -> JobLease:
    """Copy the job at fsspec `url` into the cache; its local folder, held."""
    import fsspec

    scheme = url.split("://", 1)[0].lower()
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError:
        extra = FSSPEC_EXTRAS.get(scheme)
        hint = (f"install the '{extra}' extra: pip install 'l4[{extra}]'" if extra
                else "install its fsspec backend")
        raise JobError(f"reading {scheme}:// log roots needs more packages: {hint}") from None
    except ValueError:
        raise JobError(f"L4_LOG_ROOT: unknown storage protocol {scheme}://") from None
    try:
        infos = fs.find(path, maxdepth=MAX_DEPTH, detail=True)
    except FileNotFoundError:
        infos = {}
    except Exception as exc:  # noqa: BLE001 - storage backends raise their own kinds; one line
        raise JobError(f"cannot list {safe_url(url)}: {exc.__class__.__name__}") from None
    prefix = path.rstrip("/") + "/"
    files: dict[str, tuple[str, dict]] = {}
    for name, info in sorted(infos.items()):
        if info.get("type") != "file" or not name.startswith(prefix):
            continue
        rel = name[len(prefix):]
        if all(safe_segment(s) for s in rel.split("/")):
            files[rel] = (name, info)
        if len(files) > MAX_FILES:
            raise JobError(f"job at {safe_url(url)} holds more than {MAX_FILES} files")
    if not files:
        raise JobError(missing)
    budget.total = sum(int(info.get("size") or 0) for _, info in files.values())
    cache = JobCache(cache_root(settings), settings.cache_max_bytes)

    def fill(job: CachedJob) -> set[str]:
        for rel, (name, info) in files.items():
            _copy_fsspec_file(fs, name, info, job, rel, settings, budget)
        return set(files)

    return _fill_cached_job(cache, url, job_id, budget, fill)


def _fill_cached_job(cache: JobCache, url: str, job_id: str, budget: Budget,
                     fill: Callable[[CachedJob], set[str]]) -> JobLease:
    """Hold the cached job of `url`; when this request must (re)write it, `fill` downloads its files
    and names those to keep. A failed fill releases the hold; the cache is evicted to its cap after."""
    lease = cache.hold(url, job_id, _deadline(budget))
    if not lease.writing:
        return lease  # another request holds it, freshly fetched: used as it is
    try:
        job = cache.job(url, job_id)
        job.begin()
        job.finish(fill(job))
        lease.written()
    except BaseException:
        lease.release()
        raise
    cache.evict()
    return lease


def _version(info: dict) -> str:
    for key in ("ETag", "etag", "md5Hash", "generation", "version_id"):
        if info.get(key):
            return str(info[key])
    stamp = info.get("mtime") or info.get("LastModified") or info.get("updated") or info.get("created")
    return f"{info.get('size')}-{stamp}"


def _copy_fsspec_file(fs, name: str, info: dict, job: CachedJob, rel: str, settings: Settings,
                      budget: Budget) -> None:
    url = fs.unstrip_protocol(name)
    version = _version(info)
    dest = _dest(job, rel)
    cached = job.lookup(rel, url)
    if cached is not None and cached.etag == version:
        budget.add_expanded(cached.expanded, f"job '{job.path.name}'")
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(f".part-{uuid.uuid4().hex[:12]}-{dest.name}")
    size = 0
    try:
        try:
            with fs.open(name, "rb") as src, open(part, "wb") as out:
                while chunk := src.read(READ_STEP):
                    out.write(chunk)
                    size += len(chunk)
                    budget.add(len(chunk), f"fetching {safe_url(url)}")
        except OSError as exc:
            raise JobError(f"cannot read {safe_url(url)}: {exc.__class__.__name__}") from None
        sizes: list[int] = []
        _verifier(settings, budget, rel, sizes)(part)
        os.replace(part, dest)
    finally:
        part.unlink(missing_ok=True)
    entry = Entry(version, None, size, sizes[0])
    budget.add_expanded(entry.expanded, f"job '{job.path.name}'")
    job.store(rel, url, entry)


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".part-{uuid.uuid4().hex[:12]}-{path.name}")
    part.write_bytes(data)
    os.replace(part, path)
