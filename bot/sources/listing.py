"""Which files make up a job served over HTTP(S).

The job's `job.json` names its rank files in its `nodes` map (CONTRACTS §1); each name is looked
for at `JOB/<name>` (the flat layout the contract describes) and, when that is missing, at
`JOB/<node>/<name>`. Without a `nodes` map, the job folder's HTML directory index (as nginx
`autoindex` or `python -m http.server` serve it) is read for links, into sub-folders up to
`MAX_DEPTH` levels. Only links inside the job's folder are followed; at most `MAX_FILES` files.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import quote, unquote

import httpx

from bot.sources.fetch import Fetcher
from bot.sources.netguard import safe_url
from engine.ingest import JobError

MAX_FILES = 20_000
MAX_DEPTH = 3  # JOB/<node>/<rank file> needs 2
MAX_PAGES = 2_000
MANIFEST_MAX_BYTES = 4 << 20
INDEX_MAX_BYTES = 8 << 20
_SEGMENT = re.compile(r"[^/\\\x00-\x1f\x7f]{1,255}")


@dataclass
class RemoteFile:
    rel: str  # where it goes in the local job folder (POSIX, relative)
    url: str
    fallback: tuple[str, str] | None = None  # (rel, url) to try when `url` is missing


def safe_segment(name: str) -> bool:
    """One path segment that stays inside its folder and is not hidden."""
    return bool(_SEGMENT.fullmatch(name)) and not name.startswith(".")


def list_http_job(fetcher: Fetcher, base_url: str) -> tuple[bytes | None, list[RemoteFile]]:
    """The job's manifest bytes (None when it has none) and its files, at `base_url` (ends in /)."""
    base = httpx.URL(base_url)
    manifest, _ = fetcher.get_bytes(str(base.join("job.json")), MANIFEST_MAX_BYTES, "application/json")
    nodes = _nodes(manifest)
    if nodes:
        return manifest, _from_nodes(base, nodes)
    return manifest, _crawl(fetcher, base)


def _nodes(manifest: bytes | None) -> dict[str, list[str]]:
    if not manifest:
        return {}
    try:
        data = json.loads(manifest.decode("utf-8", errors="replace"))
    except ValueError:
        return {}  # the engine reports the broken manifest when it reads the job
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, dict):
        return {}
    return {str(k): [str(n) for n in v] for k, v in nodes.items() if isinstance(v, list)}


def _from_nodes(base: httpx.URL, nodes: dict[str, list[str]]) -> list[RemoteFile]:
    files: list[RemoteFile] = []
    for node, names in nodes.items():
        for name in names:
            if not safe_segment(name) or name == "job.json":
                raise JobError(f"job.json at {safe_url(base)} names an unsafe file: {name[:60]!r}")
            flat = RemoteFile(name, str(base.join(quote(name))))
            if safe_segment(node):
                rel = f"{node}/{name}"
                flat.fallback = (rel, str(base.join(f"{quote(node)}/{quote(name)}")))
            files.append(flat)
            if len(files) > MAX_FILES:
                raise JobError(f"job at {safe_url(base)} lists more than {MAX_FILES} files")
    return files


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            for key, value in attrs:
                if key == "href" and value:
                    self.hrefs.append(value)


def parse_index(html: str, page: httpx.URL, base: httpx.URL) -> tuple[list[str], list[str]]:
    """Relative paths (from `base`) of the files and of the sub-folders an index page links to."""
    parser = _Links()
    parser.feed(html)
    files: list[str] = []
    folders: list[str] = []
    for href in parser.hrefs:
        try:
            target = page.join(href)
        except (httpx.InvalidURL, ValueError):
            continue
        if (target.scheme, target.host, target.port) != (base.scheme, base.host, base.port):
            continue
        if target.query or not target.path.startswith(base.path) or target.path == base.path:
            continue
        rest = target.path[len(base.path):]
        is_folder = rest.endswith("/")
        segments = [unquote(s) for s in rest.strip("/").split("/")]
        if not all(safe_segment(s) for s in segments):
            continue
        rel = "/".join(segments)
        (folders if is_folder else files).append(rel)
    return files, folders


def _crawl(fetcher: Fetcher, base: httpx.URL) -> list[RemoteFile]:
    files: dict[str, RemoteFile] = {}
    queue: list[str] = [""]
    seen: set[str] = set()
    while queue:
        rel_dir = queue.pop(0)
        if rel_dir in seen:
            continue
        seen.add(rel_dir)
        if len(seen) > MAX_PAGES:
            raise JobError(f"job at {safe_url(base)} has more than {MAX_PAGES} folders")
        page = base.join(quote(rel_dir + "/")) if rel_dir else base
        body, _ = fetcher.get_bytes(str(page), INDEX_MAX_BYTES, "text/html")
        if body is None:
            continue
        found, folders = parse_index(body.decode("utf-8", errors="replace"), page, base)
        for rel in found:
            if rel == "job.json" or rel.count("/") > MAX_DEPTH - 1:
                continue
            files.setdefault(rel, RemoteFile(rel, str(base.join(quote(rel)))))
            if len(files) > MAX_FILES:
                raise JobError(f"job at {safe_url(base)} lists more than {MAX_FILES} files")
        for rel in folders:
            if rel.count("/") + 1 < MAX_DEPTH:
                queue.append(rel)
    return sorted(files.values(), key=lambda f: f.rel)
