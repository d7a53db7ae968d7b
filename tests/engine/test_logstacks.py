"""Faulthandler dumps read in the scan pass (engine.logstacks): the same frames as
engine.stacks.parse_faulthandler, whatever the block boundaries, from plain and gzip rank files."""

import gzip

from engine.ingest import RankFile
from engine.logstacks import FaulthandlerReader
from engine.scan import scan_file
from engine.stacks import parse_faulthandler
from tests.engine.test_stacks import FAULTHANDLER

OLDER = """[default3]:Thread 0x00007f96f79e2b80 (most recent call first):
[default3]:  File "/app/old.py", line 1 in earlier
[default3]:  File "/app/train.py", line 154 in <module>
2026-12-01 08:40:00,000 INFO step 3/12
"""


def _read(data: bytes, cuts: list[int]) -> list[str]:
    """The reader fed `data` split at the line ends nearest `cuts` (blocks of whole lines)."""
    reader, lines, start = FaulthandlerReader(), data.split(b"\n"), 0
    for cut in [*cuts, len(lines)]:
        reader.feed(b"\n".join(lines[start:cut]))
        start = cut
    return reader.frames()


def test_the_frames_are_parse_faulthandlers_at_every_block_boundary():
    text = OLDER + FAULTHANDLER
    want = parse_faulthandler(text.splitlines())
    assert want == ["_next_data (dataloader.py)", "main (train.py)", "<module> (train.py)"]
    n = text.count("\n")
    for cut in range(n + 1):
        assert _read(text.encode(), [cut]) == want, cut
    assert _read(text.encode(), list(range(1, n))) == want  # a block per line


def test_the_last_dump_wins_and_a_log_without_one_has_none():
    assert _read((FAULTHANDLER + OLDER).encode(), []) == ["earlier (old.py)", "<module> (train.py)"]
    traceback = b"2026-12-01 INFO step 1\nTraceback (most recent call last):\n  File \"a.py\", line 1"
    assert _read(traceback, []) == []
    assert FaulthandlerReader().frames() == []


def test_binary_bytes_around_a_dump_are_read_past(tmp_path):
    data = b"\xff\xfe\x00junk\n" + FAULTHANDLER.encode() + b"\x00\x01\x02\n"
    assert _read(data, [1, 3]) == parse_faulthandler(FAULTHANDLER.splitlines())


def test_scan_file_returns_the_dump_of_a_gzip_rank_file_read_in_small_chunks(tmp_path):
    path = tmp_path / "rank-3.log.gz"
    body = "".join(f"2026-12-01 08:4{i % 10}:00,000 INFO step {i}/12 loss 0.{i}\n" for i in range(400))
    with gzip.open(path, "wt") as fh:
        fh.write(body + OLDER + body + FAULTHANDLER)
    scan = scan_file(RankFile(path=str(path), node="node-1", size=path.stat().st_size), chunk=512)
    assert scan.fault_frames == ["_next_data (dataloader.py)", "main (train.py)", "<module> (train.py)"]
    plain = tmp_path / "rank-4.log"
    plain.write_text(body)
    assert scan_file(RankFile(path=str(plain), node="node-1", size=plain.stat().st_size)).fault_frames == []
