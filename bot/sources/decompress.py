"""Caps on what a downloaded .gz/.zst file expands to (no decompression bombs).

Remote files are kept compressed in the cache (the engine reads .gz and .zst itself, and the
cache then holds several times more jobs). Before a downloaded file is put where the engine can
see it, `expanded_size` decompresses it once, discarding the output in 1 MiB steps, and refuses
it as soon as it passes the absolute cap or `ratio` × its compressed size. Memory stays bounded
(bounded reads) and so does the work (it stops at the cap). A corrupt or truncated stream is not
refused here: the engine reads such files up to the damage and reports them, as for local jobs.
"""
from __future__ import annotations

import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import zstandard

from engine.ingest import JobError

STEP = 1 << 20
RATIO_FLOOR = 16 << 20  # below this many expanded bytes the ratio is not judged (tiny files)


class BombError(JobError):
    """A compressed file expands beyond the caps."""


def is_compressed(name: str) -> bool:
    return name.endswith((".gz", ".zst"))


def expanded_size(path: Path, *, max_bytes: int, max_ratio: float, display: str = "") -> int:
    """Decompressed size of `path` (.gz or .zst by its name; other files: their size). BombError
    when it would pass `max_bytes`, or `max_ratio` times the compressed size beyond 16 MiB."""
    compressed = path.stat().st_size
    name = display or path.name
    if not is_compressed(path.name):
        if compressed > max_bytes:
            raise BombError(f"{name}: {compressed:,} bytes is more than the {max_bytes:,}-byte limit")
        return compressed
    limit = min(max_bytes, max(RATIO_FLOOR, int(max_ratio * compressed)))
    total = 0
    with open(path, "rb") as fh:
        steps = _gzip_steps(fh) if path.name.endswith(".gz") else _zstd_steps(fh)
        for n in steps:
            total += n
            if total > limit:
                why = (f"more than the {max_bytes:,}-byte limit" if limit == max_bytes
                       else f"more than {max_ratio:g}× its compressed size")
                raise BombError(f"refused: {name} expands to {why} (decompression bomb?)")
    return total


def _gzip_steps(fh: BinaryIO) -> Iterator[int]:
    """Sizes of successive bounded pieces of output, over every gzip member, up to any damage."""
    d = zlib.decompressobj(zlib.MAX_WBITS | 16)
    try:
        while block := fh.read(STEP):
            data = block
            while data:
                yield len(d.decompress(data, STEP))
                data = d.unconsumed_tail
                if d.eof:
                    data = d.unused_data + data
                    if not data.strip(b"\x00"):
                        break  # padding after the last member
                    d = zlib.decompressobj(zlib.MAX_WBITS | 16)
        yield len(d.flush())
    except zlib.error:
        return  # damaged stream: counted up to the damage; the engine reads as far as it can


def _zstd_steps(fh: BinaryIO) -> Iterator[int]:
    reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True, closefd=False)
    try:
        while chunk := reader.read(STEP):
            yield len(chunk)
    except zstandard.ZstdError:
        return
