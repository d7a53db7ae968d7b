"""Decompression caps: bombs stopped at the ratio or absolute cap, real logs and damaged files pass."""
import gzip
import time
import zlib
from pathlib import Path

import pytest
import zstandard

from bot.sources.decompress import BombError, expanded_size
from engine.ingest import ReadReport, iter_chunks


def _gzip_zeros(path: Path, mib: int) -> Path:
    with gzip.open(path, "wb", compresslevel=1) as fh:
        block = bytes(1 << 20)
        for _ in range(mib):
            fh.write(block)
    return path


def test_gzip_bomb_stopped_at_the_ratio_cap(tmp_path: Path) -> None:
    bomb = _gzip_zeros(tmp_path / "rank-0.log.gz", 64)  # ~280 KB that expands to 64 MiB
    t = time.process_time()  # CPU seconds: not the load's
    with pytest.raises(BombError, match=r"rank-0.log.gz expands to more than 20× its compressed size"):
        expanded_size(bomb, max_bytes=1 << 40, max_ratio=20)
    assert time.process_time() - t < 5


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


def _engine_reads(path: Path) -> int:
    report = ReadReport()
    for _ in iter_chunks(str(path), report):
        pass
    return report.bytes


def test_zero_padding_between_gzip_members_hides_no_bomb(tmp_path: Path) -> None:
    # a tiny member, zero padding, then a bomb member: gzip.open (the engine) skips the padding
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = co.compress(bytes(64 << 20)) + co.flush()
    padded = tmp_path / "rank-0.log.gz"
    padded.write_bytes(gzip.compress(b"hello\n") + bytes(16) + bomb)
    with pytest.raises(BombError, match="more than the 8,388,608-byte limit"):
        expanded_size(padded, max_bytes=8 << 20, max_ratio=1e9)
    with pytest.raises(BombError, match="more than 20× its compressed size"):
        expanded_size(padded, max_bytes=1 << 40, max_ratio=20)


def test_multi_member_gzip_with_padding_is_measured_as_the_engine_reads_it(tmp_path: Path) -> None:
    parts = [b"".join(b"[rank%d]: step %d ok\n" % (k, i) for i in range(3000)) for k in range(3)]
    f = tmp_path / "rank-1.log.gz"
    f.write_bytes(gzip.compress(parts[0]) + bytes(512) + gzip.compress(parts[1]) + gzip.compress(parts[2])
                  + bytes(100))  # padding between members and after the last (tape blocks, appenders)
    size = expanded_size(f, max_bytes=1 << 30, max_ratio=200)
    assert size == sum(map(len, parts)) == _engine_reads(f)


def test_damage_after_a_member_is_counted_up_to_the_damage(tmp_path: Path) -> None:
    text = b"line of a log\n" * 5000
    f = tmp_path / "rank-2.log.gz"
    f.write_bytes(gzip.compress(text) + b"\x1f\x8bgarbage that is not a gzip member")
    # never less than the engine reads (it may drop the whole read before the damage)
    assert expanded_size(f, max_bytes=1 << 30, max_ratio=200) == len(text) >= _engine_reads(f)


def test_zstd_is_measured_as_the_engine_reads_it(tmp_path: Path) -> None:
    text = b"[rank0]: iteration 1 ok\n" * 10000
    f = tmp_path / "rank-3.log.zst"
    f.write_bytes(zstandard.ZstdCompressor().compress(text) + zstandard.ZstdCompressor().compress(text))
    assert expanded_size(f, max_bytes=1 << 30, max_ratio=200) == _engine_reads(f)
    cut = tmp_path / "rank-4.log.zst"
    cut.write_bytes(f.read_bytes()[:200])
    assert expanded_size(cut, max_bytes=1 << 30, max_ratio=200) >= _engine_reads(cut)
