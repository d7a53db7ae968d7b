"""The whole-chunk scan against a line-by-line reference of the same rules, on random rank files."""

import random

import pytest

from engine.fold import _fold_line
from engine.headers import parse_header
from engine.ingest import RankFile
from engine.iterruns import IterationRuns
from engine.scan import SEQ_CAP, iteration_of, scan_file


def reference(lines: list[bytes]) -> dict:
    """Line by line (pre-keys by fold's Python twin, so the C block fold is checked too): pre-key
    ids, counts, first/last positions and the per-iteration sequences (the lines after
    marker N, up to the next marker, are iteration N + step; repeats collapse; capped)."""
    local: dict[bytes, int] = {}
    counts, first, last = [], [], []
    iters: list[tuple[int, tuple[int, ...]]] = []
    current, step, prev, seg = None, 1, None, []
    for i, raw in enumerate(lines):
        key = _fold_line(raw)
        lid = local.setdefault(key, len(local))
        if lid == len(counts):
            counts.append(0)
            first.append(i)
            last.append(i)
        counts[lid] += 1
        last[lid] = i
        msg = parse_header(raw.decode()).message
        if iteration_of(msg) is None:
            if current is not None:
                seg.append(lid)
            continue
        if current is not None:
            iters.append((current, _collapse(seg)))
        number = iteration_of(raw.decode())
        if prev is not None and number > prev:
            step = number - prev
        prev, current, seg = number, number + step, []
    if current is not None and seg:
        iters.append((current, _collapse(seg)))
    return {"keys": list(local), "counts": counts, "first": first, "last": last, "iters": iters}


def _collapse(seg: list[int]) -> tuple[int, ...]:
    out = [e for k, e in enumerate(seg) if k == 0 or seg[k - 1] != e]
    return tuple(out[:SEQ_CAP])


def random_log(rng: random.Random) -> list[bytes]:
    plain = ["loss scale {a}", "[rank{r}]: NCCL INFO comm 0x{a:x} rank {r}", "saving checkpoint at {a}",
             "2026-05-01 10:00:{s:02d},123 - INFO - timers: fwd {a} ms", "grad norm {a}.{b}"]
    markers = [" iteration {it:8d}/ 1000 | consumed samples: {a} |",
               "2026-05-01 10:00:{s:02d},123 - INFO - [Rank {r}] iteration {it}: tokens {a}",
               "[Rank {r}] step={it}, loss={a}", "[Rank {r}] données é iteration {it}: débit {a}",
               "[Torch] Checkpoint global_step{it} is ready now!",
               "[Torch] Saved /mnt/ckpt/run{r}/global_step{it}/mp_rank_00_model_states.pt."]
    out, it = [], rng.randint(0, 50)
    for _ in range(rng.randint(0, 400)):
        v = {"a": rng.randint(0, 10**6), "b": rng.randint(0, 99), "r": rng.randint(0, 15),
             "s": rng.randint(0, 59), "it": it}
        if rng.random() < 0.3:
            it += rng.choice([1, 1, 1, 0, 2, 10, -7])
            it = max(it, 0)
            v["it"] = it
            out.append(rng.choice(markers).format(**v))
        else:
            line = rng.choice(plain).format(**v)
            out.extend([line] * (rng.randint(2, 4) if rng.random() < 0.1 else 1))
    return [ln.encode() for ln in out]


@pytest.mark.parametrize("seed", range(40))
def test_scan_matches_the_line_by_line_rules(tmp_path, seed):
    rng = random.Random(seed)
    lines = random_log(rng)
    path = tmp_path / "rank-0.log"
    path.write_bytes(b"".join(ln + b"\n" for ln in lines))
    chunk = rng.choice([64, 300, 1000, 1 << 20])
    scan = scan_file(RankFile(str(path), "n0", path.stat().st_size), chunk=chunk)
    want = reference(lines)
    assert scan.keys == want["keys"]
    assert scan.counts == want["counts"]
    assert scan.first_pos == want["first"] and scan.last_pos == want["last"]
    assert scan.first_line == [lines[i] for i in want["first"]]
    assert scan.last_line == [lines[i] for i in want["last"]]
    assert list(IterationRuns(scan.runs, scan.seqs)) == want["iters"]
    assert scan.lines == len(lines)


def test_long_segments_collapse_and_cap(tmp_path):
    body = [f"noise {k % 3} {k}" if k % 2 else f"other {k}" for k in range(3 * SEQ_CAP)]
    lines = [" iteration        1/ 10 | a |", *body, " iteration        2/ 10 | a |", "x", "x", "y"]
    path = tmp_path / "r.log"
    path.write_text("\n".join(lines) + "\n")
    scan = scan_file(RankFile(str(path), "n", 0), chunk=512)
    its = list(IterationRuns(scan.runs, scan.seqs))
    assert [it for it, _ in its] == [2, 3]
    assert len(its[0][1]) == SEQ_CAP
    assert [scan.keys[i] for i in its[1][1]] == [b"x", b"y"]


def test_iterations_take_memory_by_change_not_by_count(tmp_path):
    lines = []
    for it in range(1, 100_001):
        lines.append(f"2026-05-01 10:00:00,000 - INFO - [Rank 7] iteration {it}: tokens/sec 3.{it % 97}")
        lines.append(f" iteration {it:8d}/  100000 | consumed samples: {it * 96} | lm loss: 1.{it % 89} |")
    lines.append("RuntimeError: NCCL error")
    path = tmp_path / "rank-7.log"
    path.write_text("\n".join(lines) + "\n")
    scan = scan_file(RankFile(str(path), "n", 0))
    runs = IterationRuns(scan.runs, scan.seqs)
    assert len(runs) == 200_000
    assert len(scan.runs) <= 8  # two markers per iteration repeat one pattern of two
    assert runs[-1] == (100_001, (len(scan.keys) - 1,))


def test_a_file_of_lines_that_never_repeat_keeps_a_bounded_table(tmp_path, monkeypatch):
    import engine.scan as scan_mod

    monkeypatch.setattr(scan_mod, "KEY_CAP", 100)
    rng = random.Random(2)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)) for _ in range(3000)]
    lines = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(1000)]
    path = tmp_path / "free.log"
    path.write_text("\n".join(lines) + "\n")
    scan = scan_file(RankFile(str(path), "n", 0), chunk=4096)
    assert 100 < len(scan.keys) <= 201 and sum(scan.counts) == 1000
    assert all(k.startswith(scan_mod.COARSE) for k in scan.keys[100:])
    assert scan.first_line[:100] == [ln.encode() for ln in lines[:100]]


def _head_reference(path: str) -> list[str]:
    """The first lines `head_lines` must give: those of the file's first HEAD_BYTES block."""
    from engine.decoration import sample_size
    from engine.ingest import ReadReport, iter_chunks
    from engine.scan import HEAD_BYTES

    block = next(iter_chunks(path, ReadReport(), HEAD_BYTES), None)
    if block is None:
        return []
    return [block.line(i).decode("utf-8", "replace") for i in range(min(len(block), sample_size()))]


@pytest.mark.parametrize("shape", ["short", "wide", "few-wide", "one-huge", "no-newline", "empty", "gz",
                                   "gz-wide", "tail"])
def test_head_lines_are_the_first_block_s_lines_whatever_the_probe_reads(tmp_path, shape):
    from engine.scan import head_lines
    from tests.helpers.jobs import write_rank

    width = {"short": 40, "wide": 300, "few-wide": 9000, "gz": 40, "gz-wide": 2000, "tail": 40}
    count = {"few-wide": 20, "tail": 7}
    path = tmp_path / "rank-0.log"
    if shape == "one-huge":  # a first line longer than the head and MAX_LINE: cut
        path.write_bytes(b"x" * 300_000 + b"\nsecond\n")
    elif shape == "no-newline":
        path.write_bytes(b"just one unterminated line")
    elif shape == "empty":
        path.write_bytes(b"")
    else:
        lines = [f"{i:06d} " + "w" * width[shape] for i in range(count.get(shape, 500))]
        path = write_rank(path, lines, gz=shape.startswith("gz"), newline_at_end=shape != "tail")
    got = head_lines(RankFile(str(path), "n", path.stat().st_size))
    assert got == _head_reference(str(path))
