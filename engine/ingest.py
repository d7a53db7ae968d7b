"""Job folders on disk (CONTRACTS.md §1): discover rank files, map them to nodes, read them safely."""
from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from engine.crilines import CriJoiner
from engine.fold import line_starts
from engine.hangfiles import is_hang_file

MAX_LINE = 64 * 1024  # bytes; longer lines are cut (and counted)
CHUNK = 8 * 1024 * 1024
_SKIP_NAMES = {"job.json", "truth.json"}


class JobError(ValueError):
    """The job cannot be analysed at all (missing, empty, unreadable manifest...)."""


@dataclass(frozen=True)
class RankFile:
    path: str
    node: str
    size: int  # bytes on disk


@dataclass
class JobSpec:
    root: Path
    job_id: str
    status: str | None = None
    settings: dict = field(default_factory=dict)
    files: list[RankFile] = field(default_factory=list)
    # "path: reason" of files and folders not read because a link takes them outside `confine`
    refused: list[str] = field(default_factory=list)


def _read_manifest(root: Path, inside: Callable[[Path], bool]) -> dict:
    path = root / "job.json"
    if not path.is_file() or not inside(path):
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError) as exc:
        raise JobError(f"{path}: job.json is not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise JobError(f"{path}: job.json must hold a JSON object")
    return data


OUTSIDE = "a link to outside the log root, not read"


def _confinement(root: Path, confine: Path | str | None) -> Callable[[Path], bool]:
    """Whether a path, links followed, lies inside `confine` (always true without one). JobError
    when `root` itself does."""
    if confine is None:
        return lambda _path: True
    base = os.path.realpath(confine)

    def inside(path: Path) -> bool:
        real = os.path.realpath(path)
        return real == base or real.startswith(base.rstrip(os.sep) + os.sep)

    if not inside(root):
        raise JobError(f"refused: job folder {root.name[:80]} is a link to outside the log root")
    return inside


def discover(root: Path | str, *, confine: Path | str | None = None) -> JobSpec:
    """The job at `root`: its manifest and its rank files (sorted, node from the parent folder).

    With `confine` (the log root or cache it came from), nothing whose path, links followed, lands
    outside `confine` is read: such files and folders are listed in `JobSpec.refused`."""
    root = Path(root)
    if not root.exists():
        raise JobError(f"no such job folder: {root}")
    if not root.is_dir():
        raise JobError(f"not a job folder: {root}")
    inside = _confinement(root, confine)
    refused: list[str] = []
    manifest = _read_manifest(root, inside)
    if (root / "job.json").exists() and not inside(root / "job.json"):
        refused.append(f"{root / 'job.json'}: {OUTSIDE}")
    by_file: dict[str, str] = {}
    nodes = manifest.get("nodes")
    if isinstance(nodes, dict):
        for node, names in nodes.items():
            for name in names if isinstance(names, list) else []:
                by_file[str(name)] = str(node)
    files: list[RankFile] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        refused += [f"{Path(dirpath) / d}: {OUTSIDE}" for d in dirnames if not inside(Path(dirpath) / d)]
        rel = Path(dirpath).relative_to(root)
        for name in sorted(filenames):
            if name.startswith(".") or (rel == Path(".") and name in _SKIP_NAMES) or is_hang_file(rel / name):
                continue  # dumps beside the logs are read by engine.hang, not as log text
            path = Path(dirpath) / name
            if not inside(path):
                refused.append(f"{path}: {OUTSIDE}")
                continue
            try:
                size = path.stat().st_size
            except OSError:
                size = 0
            if rel == Path("."):
                node = by_file.get(name) or _strip_suffixes(name)
            else:
                node = rel.parts[0]
            files.append(RankFile(str(path), node, size))
    if not files:
        why = f" ({len(refused)} link(s) to outside the log root not read)" if refused else ""
        raise JobError(f"job folder holds no log files: {root}{why}")
    settings = manifest.get("settings") if isinstance(manifest.get("settings"), dict) else {}
    status = manifest.get("status") if isinstance(manifest.get("status"), str) else None
    job_id = str(manifest.get("job_id") or root.name)
    return JobSpec(root=root, job_id=job_id, status=status, settings=settings, files=files, refused=refused)


def _strip_suffixes(name: str) -> str:
    for suffix in (".gz", ".zst", ".bz2", ".xz", ".log", ".txt", ".out", ".err"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def open_binary(path: str) -> IO[bytes]:
    """`path` opened for reading, decompressed when it is .gz, .zst, .bz2 or .xz.

    Every decoder raises on a stream that ends early (a truncated last frame), so a cut-off file
    is reported, not read as if it were whole."""
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".zst"):
        return ZstdFrames(open(path, "rb"))
    if path.endswith(".bz2"):
        return bz2.open(path, "rb")
    if path.endswith(".xz"):
        return lzma.open(path, "rb")
    return open(path, "rb")


class TruncatedFrame(EOFError):
    """A compressed file ends inside a frame: the writer died, or the copy was cut."""


class ZstdFrames(io.RawIOBase):
    """The decoded bytes of every zstd frame of a file (concatenated zstd output has several).

    zstandard's own stream reader stops silently at a truncated frame; this reader decodes a
    frame incrementally, so every byte before the damage comes out, and then raises
    TruncatedFrame (a file that ends inside a frame) or zstandard.ZstdError (corrupt data)."""

    IN_STEP = 256 * 1024  # compressed bytes fed at a time (bounds the decoded size of one step)
    OUT_STEP = 1 << 20  # the decoder's output buffer

    def __init__(self, raw: IO[bytes]) -> None:
        import zstandard

        self._raw = raw
        self._dctx = zstandard.ZstdDecompressor()
        self._frame = None  # decompressobj of the frame being decoded, None between frames
        self._pending = b""  # compressed bytes read but not yet fed (after a frame's end)
        self._out = b""  # decoded, not yet returned from self._at on
        self._at = 0
        self.compressed_read = 0

    def readable(self) -> bool:
        return True

    def _decode_step(self) -> bytes:
        while True:
            if self._frame is not None and self._frame.eof:
                self._pending = self._frame.unused_data + self._pending
                self._frame = None
            if self._pending:
                data, self._pending = self._pending, b""
            else:
                data = self._raw.read(self.IN_STEP)
                self.compressed_read += len(data)
            if not data:
                if self._frame is not None:
                    raise TruncatedFrame(f"truncated zstd frame: the file ends inside a frame, after "
                                         f"{self.compressed_read} compressed bytes")
                return b""
            if self._frame is None:
                self._frame = self._dctx.decompressobj(write_size=self.OUT_STEP)
            out = self._frame.decompress(data)
            if out:
                return out

    def read1(self, size: int = -1) -> bytes:
        if self._at >= len(self._out):
            self._out, self._at = self._decode_step(), 0
        if self._at == 0 and (size is None or size < 0 or size >= len(self._out)):
            out, self._out = self._out, b""
            return out
        end = len(self._out) if size is None or size < 0 else self._at + size
        out = self._out[self._at:end]
        self._at += len(out)
        return out

    def read(self, size: int = -1) -> bytes:
        if size is not None and size >= 0:
            return self.read1(size)
        parts = []
        while part := self.read1():
            parts.append(part)
        return b"".join(parts)

    def close(self) -> None:
        self._raw.close()
        super().close()


@dataclass
class ReadReport:
    bytes: int = 0
    long_lines_cut: int = 0
    error: str | None = None  # why the file could not be read to its end
    truncated_tail: bool = False  # the last line has no line end (the writer died mid-line?)
    binary: bool = False  # the file's first block is not text (see `looks_binary`)


_TEXT_BYTES = bytes([9, 10, 12, 13, 27, *range(32, 256)])  # tab, line ends, ANSI escape, printable
BINARY_SAMPLE = 64 * 1024


def looks_binary(head: bytes) -> bool:
    """Whether the first bytes of a file read as binary data, not a log: a NUL byte in its
    first 8 KiB (the heuristic of git and grep) or more than 5 % control bytes."""
    sample = head[:BINARY_SAMPLE]
    if not sample:
        return False
    if b"\0" in sample[:8192]:
        return True
    return len(sample.translate(None, _TEXT_BYTES)) > 0.05 * len(sample)


@dataclass(frozen=True)
class Chunk:
    """Whole lines of a file, joined by b"\n" (no final line end), with where each line starts.

    `starts` has one entry more than there are lines (len(data) + 1), so line i is
    data[starts[i]:starts[i + 1] - 1].
    """

    data: bytes
    starts: np.ndarray

    def __len__(self) -> int:
        return len(self.starts) - 1

    def line(self, i: int) -> bytes:
        return self.data[self.starts[i]:self.starts[i + 1] - 1]

    def lines(self) -> list[bytes]:
        return self.data.split(b"\n")


def _chunk(body: bytes, report: ReadReport) -> Chunk:
    """`body` as a Chunk, its over-long lines cut to MAX_LINE (and counted)."""
    starts, longest = line_starts(body)
    if longest > MAX_LINE:
        lines = body.split(b"\n")
        report.long_lines_cut += sum(1 for ln in lines if len(ln) > MAX_LINE)
        return _chunk(b"\n".join(ln[:MAX_LINE] for ln in lines), report)
    return Chunk(body, starts)


def _read_block(fh: IO[bytes], size: int) -> tuple[bytes, Exception | None]:
    """Up to `size` bytes, read in the decoder's own steps (`read1`), so that a corrupt stream
    still gives every byte decoded before the damage, with the error beside them."""
    parts: list[bytes] = []
    got = 0
    read = getattr(fh, "read1", fh.read)
    try:
        while got < size:
            part = read(size - got)
            if not part:
                break
            parts.append(part)
            got += len(part)
    except Exception as exc:  # noqa: BLE001 - decoder errors of every kind; the caller reports them
        return b"".join(parts), exc
    return parts[0] if len(parts) == 1 else b"".join(parts), None


def iter_chunks(path: str, report: ReadReport, chunk: int = CHUNK) -> Iterator[Chunk]:
    """Chunks of whole lines, each at most MAX_LINE bytes, read in large blocks.

    A truncated last line is kept; a read error (corrupt gzip...) ends the file and is noted in
    `report.error`, and the lines before it are still yielded. Kubernetes (CRI) records of one long
    line are joined back into it (`engine.crilines`).
    """
    joiner = CriJoiner(MAX_LINE)
    for body in _bodies(path, report, chunk):
        joined = joiner.join(body)
        if joined is not None:
            yield _chunk(joined, report)
    rest = joiner.finish()
    if rest is not None:
        yield _chunk(rest, report)
    report.long_lines_cut += joiner.cut


def _bodies(path: str, report: ReadReport, chunk: int) -> Iterator[bytes]:
    """The blocks of whole lines of `iter_chunks`, as bytes, before they are split into lines."""
    carry = b""
    skipping = False  # inside an over-long line whose head was already emitted
    try:
        fh = open_binary(path)
    except OSError as exc:
        report.error = f"cannot open ({exc.strerror or exc.__class__.__name__})"
        return
    with fh:
        failed = False
        while not failed:
            data, exc = _read_block(fh, chunk)
            report.binary = report.binary or (report.bytes == 0 and looks_binary(data))
            if exc is not None:  # any decoder error (corrupt gzip/zstd) ends this file only
                report.error = f"read error after {report.bytes + len(data)} bytes ({_reason(exc)})"
                failed = True  # the lines read before the damage are still analysed
            if not data:
                break
            report.bytes += len(data)
            nl = data.rfind(b"\n")
            if nl < 0:
                if skipping:
                    continue
                carry += data
                if len(carry) > MAX_LINE:
                    report.long_lines_cut += 1
                    yield carry[:MAX_LINE]
                    carry, skipping = b"", True
                continue
            body: bytes | None
            if skipping:  # the rest of an over-long line runs to the first newline
                first_nl = data.find(b"\n")
                body = data[first_nl + 1:nl] if first_nl < nl else None
                skipping = False
            else:
                body = carry + memoryview(data)[:nl]  # one copy
            carry = data[nl + 1:]
            if len(carry) > MAX_LINE:
                report.long_lines_cut += 1
                head = carry[:MAX_LINE]
                body = head if body is None else body + b"\n" + head
                carry, skipping = b"", True
            if body is not None:
                yield bytes(body)
        if carry and not skipping:
            report.truncated_tail = True
            yield carry


def iter_blocks(path: str, report: ReadReport, chunk: int = CHUNK) -> Iterator[list[bytes]]:
    """Lists of raw lines (no line ends), at most MAX_LINE bytes each: `iter_chunks`, split."""
    for c in iter_chunks(path, report, chunk):
        yield c.lines()


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    return text[:120]
