import gzip
import json

import pytest
import zstandard

from engine.ingest import MAX_LINE, JobError, ReadReport, discover, iter_blocks, iter_chunks


def _lines(path, chunk=1 << 20):
    rep = ReadReport()
    out = [ln for block in iter_blocks(str(path), rep, chunk=chunk) for ln in block]
    return out, rep


def test_discover_nodes_from_folders_and_manifest(tmp_path):
    (tmp_path / "node-a").mkdir()
    (tmp_path / "node-a" / "rank-0.log").write_text("x\n")
    (tmp_path / "rank-7.log").write_text("y\n")
    (tmp_path / "rank-8.log").write_text("z\n")
    (tmp_path / "job.json").write_text(json.dumps({"job_id": "j9", "nodes": {"node-b": ["rank-7.log"]}}))
    spec = discover(tmp_path)
    assert spec.job_id == "j9"
    nodes = {f.path.rsplit("/", 1)[1]: f.node for f in spec.files}
    assert nodes == {"rank-0.log": "node-a", "rank-7.log": "node-b", "rank-8.log": "rank-8"}


def test_missing_and_empty_folder(tmp_path):
    with pytest.raises(JobError, match="no such job folder"):
        discover(tmp_path / "nope")
    with pytest.raises(JobError, match="no log files"):
        discover(tmp_path)


def test_bad_manifest_is_a_clear_error(tmp_path):
    (tmp_path / "job.json").write_text("{not json")
    (tmp_path / "r.log").write_text("x\n")
    with pytest.raises(JobError, match="job.json"):
        discover(tmp_path)


def test_plain_gz_zst_and_truncated_last_line(tmp_path):
    (tmp_path / "a.log").write_bytes(b"one\ntwo\nthree-no-newline")
    with gzip.open(tmp_path / "b.log.gz", "wb") as fh:
        fh.write(b"g1\ng2\n")
    (tmp_path / "c.log.zst").write_bytes(zstandard.ZstdCompressor().compress(b"z1\nz2\n"))
    assert _lines(tmp_path / "a.log")[0] == [b"one", b"two", b"three-no-newline"]
    assert _lines(tmp_path / "b.log.gz")[0] == [b"g1", b"g2"]
    assert _lines(tmp_path / "c.log.zst")[0] == [b"z1", b"z2"]


def test_long_lines_are_cut_and_counted_across_chunks(tmp_path):
    big = b"A" * (10 * 1024 * 1024)
    (tmp_path / "a.log").write_bytes(b"before\n" + big + b"\nafter\n" + b"B" * (MAX_LINE + 5))
    lines, rep = _lines(tmp_path / "a.log", chunk=1 << 20)
    assert lines[0] == b"before"
    assert lines[1] == b"A" * MAX_LINE
    assert lines[2] == b"after"
    assert lines[3] == b"B" * MAX_LINE
    assert len(lines) == 4
    assert rep.long_lines_cut == 2


def test_corrupt_gzip_keeps_what_was_read(tmp_path):
    data = gzip.compress(b"".join(b"line %d\n" % i for i in range(20000)))
    (tmp_path / "x.log.gz").write_bytes(data[: len(data) // 2])
    lines, rep = _lines(tmp_path / "x.log.gz", chunk=4096)
    assert rep.error and "read error" in rep.error
    assert lines[0] == b"line 0"


def test_binary_bytes_do_not_stop_reading(tmp_path):
    (tmp_path / "bin.log").write_bytes(bytes(range(256)) * 100 + b"\nok\n")
    lines, rep = _lines(tmp_path / "bin.log")
    assert lines[-1] == b"ok" and rep.error is None


def test_chunks_know_where_each_line_starts(tmp_path):
    lines = [b"", b"a", b"bb" * 40, b"", b"ccc", b"X" * (MAX_LINE + 3), b"tail"]
    (tmp_path / "a.log").write_bytes(b"\n".join(lines))
    rep = ReadReport()
    got = [c.line(i) for c in iter_chunks(str(tmp_path / "a.log"), rep, chunk=50) for i in range(len(c))]
    assert got == [ln[:MAX_LINE] for ln in lines]
    assert rep.long_lines_cut == 1 and rep.truncated_tail


def test_a_gzip_cut_short_keeps_every_line_before_the_cut(tmp_path):
    # a job killed while writing compressed logs leaves a gzip without its end; the lines before the
    # cut are what the SRE needs, even when the whole file is smaller than one read block
    lines = [f"step {i} loss 1.{i % 97:02d}".encode() for i in range(60_000)]
    whole = gzip.compress(b"\n".join(lines) + b"\n")
    path = tmp_path / "rank-0.log.gz"
    path.write_bytes(whole[: int(len(whole) * 0.8)])
    report = ReadReport()
    got = [ln for block in iter_blocks(str(path), report) for ln in block]
    assert report.error and "read error" in report.error
    assert len(got) > 40_000 and got[:3] == lines[:3]
    assert got[-2] == lines[len(got) - 2]  # all whole lines up to the damage, in order


def test_zstd_with_several_frames_is_read_to_the_end(tmp_path):
    c = zstandard.ZstdCompressor()
    path = tmp_path / "rank-0.log.zst"
    path.write_bytes(c.compress(b"first frame\n") + c.compress(b"second frame\n"))  # like `cat a.zst b.zst`
    report = ReadReport()
    got = [ln for block in iter_blocks(str(path), report) for ln in block]
    assert got == [b"first frame", b"second frame"]
    assert report.error is None
