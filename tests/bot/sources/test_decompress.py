"""Decompression caps: bombs stopped at the ratio or absolute cap, real logs and damaged files pass."""
import gzip
import time
from pathlib import Path

import pytest
import zstandard

from bot.sources.decompress import BombError, expanded_size


def _gzip_zeros(path: Path, mib: int) -> Path:
    with gzip.open(path, "wb", compresslevel=1) as fh:
        block = bytes(1 << 20)
        for _ in range(mib):
            fh.write(block)
    return path


def test_gzip_bomb_stopped_at_the_ratio_cap(tmp_path: Path) -> None:
    bomb = _gzip_zeros(tmp_path / "rank-0.log.gz", 64)  # ~280 KB that expands to 64 MiB
    t = time.monotonic()
    with pytest.raises(BombError, match=r"rank-0.log.gz expands to more than 20× its compressed size"):
        expanded_size(bomb, max_bytes=1 << 40, max_ratio=20)
    assert time.monotonic() - t < 5


def test_zstd_bomb_stopped_at_the_absolute_cap(tmp_path: Path) -> None:
    bomb = tmp_path / "r.log.zst"
    bomb.write_bytes(zstandard.ZstdCompressor().compress(bytes(40 << 20)))  # a few KB -> 40 MiB
    with pytest.raises(BombError, match="more than the 8,388,608-byte limit"):
        expanded_size(bomb, max_bytes=8 << 20, max_ratio=1e9)


def test_real_logs_and_damaged_files_pass(tmp_path: Path) -> None:
    text = b"".join(b"[rank3]: iteration %d | lm loss: 2.5 | grad norm: 0.1\n" % i for i in range(20000))
    ok = tmp_path / "a.log.gz"
    ok.write_bytes(gzip.compress(text))
    assert expanded_size(ok, max_bytes=1 << 30, max_ratio=200) == len(text)
    cut = tmp_path / "b.log.gz"
    cut.write_bytes(ok.read_bytes()[: ok.stat().st_size // 2])  # the writer died mid-file
    assert 0 < expanded_size(cut, max_bytes=1 << 30, max_ratio=200) < len(text)
    plain = tmp_path / "c.log"
    plain.write_bytes(text)
    assert expanded_size(plain, max_bytes=1 << 30, max_ratio=1) == len(text)
    with pytest.raises(BombError, match="more than the 1,000-byte limit"):
        expanded_size(plain, max_bytes=1000, max_ratio=1)
