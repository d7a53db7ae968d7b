"""Caps on what a downloaded .gz/.zst file expands to (no decompression bombs).

Remote files are kept compressed in the cache (the engine reads .gz and .zst itself, and the
cache then holds several times more jobs). Before a downloaded file is put where the engine can
see it, `expanded_size` reads it once through the very reader the engine uses
(`engine.ingest.open_binary`: gzip.open, the zstd stream reader), discarding the output in 1 MiB
steps, and refuses it as soon as it passes the absolute cap or `ratio` × its compressed size. So
the size measured is exactly what the engine will read (gzip members after zero padding, zstd
frames...), memory stays bounded (bounded reads) and so does the work (it stops at the cap).
A corrupt or truncated stream is not refused here: it is counted up to the damage, where the
engine's reader stops too (the engine reports such files, as for local jobs).
"""
from __future__ import annotations

from pathlib import Path

from engine.ingest import JobError, open_binary

STEP = 1 << 20
RATIO_FLOOR = 16 << 20  # below this many expanded bytes the ratio is not judged (tiny files)


class BombError(JobError):
    """A compressed file expands beyond the caps."""


def is_compressed(name: str) -> bool:
    return name.endswith((".gz", ".zst"))


def expanded_size(path: Path, *, max_bytes: int, max_ratio: float, display: str = "") -> int:
    """Decompressed size of `path` (.gz or .zst by its name; other files: their size), as the
    engine reads it. BombError when it would pass `max_bytes`, or `max_ratio` times the compressed
    size beyond 16 MiB."""
    compressed = path.stat().st_size
    name = display or path.name
    if not is_compressed(path.name):
        if compressed > max_bytes:
            raise BombError(f"{name}: {compressed:,} bytes is more than the {max_bytes:,}-byte limit")
        return compressed
    limit = min(max_bytes, max(RATIO_FLOOR, int(max_ratio * compressed)))
    total = 0
    with open_binary(str(path)) as fh:
        while True:
            try:
                n = len(fh.read1(STEP))  # read1: what came before any damage is counted
            except Exception:  # noqa: BLE001 - as engine.ingest.iter_chunks: damage ends the file
                break
            if not n:
                break
            total += n
            if total > limit:
                why = (f"more than the {max_bytes:,}-byte limit" if limit == max_bytes
                       else f"more than {max_ratio:g}× its compressed size")
                raise BombError(f"refused: {name} expands to {why} (decompression bomb?)")
    return total
