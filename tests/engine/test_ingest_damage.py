"""Every reader reports damage: a compressed rank file cut short keeps its lines before the cut and
is listed with the bytes read; empty and binary files are named in the parsed job's stats."""

import bz2
import gzip
import lzma
import os

import pytest
import zstandard

from engine.ingest import ReadReport, iter_blocks, looks_binary
from engine.parse import parse_job

LINES = [f"[2026-05-01 10:00:00,000] [INFO] step {i} loss 1.{i % 97:02d} tok/s 1234" for i in range(60_000)]
WHOLE = ("\n".join(LINES) + "\n").encode()


def _zstd_streamed(data: bytes) -> bytes:  # like a writer that never knew the final size
    c = zstandard.ZstdCompressor().compressobj()
    return c.compress(data) + c.flush()


COMPRESSORS = {
    "zst": zstandard.ZstdCompressor().compress,
    "zst-streamed": _zstd_streamed,
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
}


def _read(path):
    report = ReadReport()
    return [ln for block in iter_blocks(str(path), report) for ln in block], report


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_a_compressed_file_cut_short_keeps_its_lines_and_says_so(tmp_path, kind):
    whole = COMPRESSORS[kind](WHOLE)
    path = tmp_path / f"rank-0.log.{kind.split('-')[0]}"
    path.write_bytes(whole[: int(len(whole) * 0.7)])
    got, report = _read(path)
    assert report.error and "read error after" in report.error, report
    assert f"after {report.bytes} bytes" in report.error  # the bytes read are named
    assert len(got) > 15_000, len(got)  # the lines before the damage, not 0
    assert got[:-1] == [ln.encode() for ln in LINES[: len(got) - 1]]  # in order, none skipped


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_a_whole_compressed_file_reads_clean(tmp_path, kind):
    path = tmp_path / f"rank-0.log.{kind.split('-')[0]}"
    path.write_bytes(COMPRESSORS[kind](WHOLE))
    got, report = _read(path)
    assert report.error is None and not report.truncated_tail
    assert len(got) == len(LINES)


def test_a_truncated_zstd_names_the_frame(tmp_path):
    whole = zstandard.ZstdCompressor().compress(WHOLE)
    path = tmp_path / "r.log.zst"
    path.write_bytes(whole[:-10])
    _, report = _read(path)
    assert "truncated zstd frame" in report.error


def test_looks_binary():
    assert not looks_binary(WHOLE[:70_000])
    assert not looks_binary(b"\x1b[32mgreen\x1b[0m progress 10%\r progress 20%\r\n")
    assert looks_binary(b"ELF\x00\x01\x02" + b"x" * 100)
    assert looks_binary(os.urandom(4096).replace(b"\x00", b"\x01"))


def test_empty_and_binary_files_are_named_in_the_stats(tmp_path):
    job = tmp_path / "job"
    (job / "node-0").mkdir(parents=True)
    (job / "node-0" / "rank-0.log").write_text("\n".join(LINES[:50]) + "\n")
    (job / "node-0" / "rank-1.log").write_bytes(b"")
    (job / "node-1").mkdir()
    (job / "node-1" / "core.1234").write_bytes(b"\x7fELF\x02\x01\x01\x00" + os.urandom(3000))
    whole = gzip.compress(WHOLE)
    (job / "node-1" / "rank-2.log.gz").write_bytes(whole[: len(whole) // 2])
    parsed = parse_job(job)
    st = parsed.stats
    assert [f.split(": ")[0] for f in st.empty_or_binary_files] == [
        str(job / "node-0" / "rank-1.log"), str(job / "node-1" / "core.1234")]
    assert "empty" in st.empty_or_binary_files[0] and "not text" in st.empty_or_binary_files[1]
    assert len(st.unreadable_files) == 1 and "rank-2.log.gz: read error after" in st.unreadable_files[0]
