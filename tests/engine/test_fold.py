"""Folding of whole variable tokens (engine/fold.py and its C twin engine/_fold.c)."""

import random

import pytest

from engine import fold
from engine.fold import BINARY_KEY, _fold_line, fold_block, fold_text


@pytest.mark.parametrize(("line", "want"), [
    ("ptr 0x7f3a9c00be10 freed", "ptr <*> freed"),
    ("comm 55d1c0ffee42aa rank 3", "comm <*> rank <*>"),
    ("id 123e4567-e89b-12d3-a456-426614174000 done", "id <*>-<*>-<*>-<*>-<*> done"),
    ("peer fe80::1ff:fe23:4567:890a up", "peer <*>::<*>:<*>:<*>:<*> up"),
    ("[cbb:e2c7:abcd:dbd:a967:c667:b654:c8e1]:29500", "[<*>:<*>:<*>:<*>:<*>:<*>:<*>:<*>]:<*>"),
    ("from 10.245.49.213:29500", "from <*>.<*>.<*>.<*>:<*>"),
    ("sha deadbeef01cafe", "sha <*>"),
    ("<torch.Tensor object at 0x7f3a9c00>", "<torch.Tensor object at <*>>"),
    ("save /tmp/tmpw_edidfe/model.pt now", "save <*> now"),
    ("NET/IB : tokens/sec/gpu 12", "NET/IB : tokens/sec/gpu <*>"),
    ("loss 3.5e-05 took 12ms", "loss <*>.<*>-<*> took <*>"),
])
def test_variable_tokens_fold_whole(line, want):
    assert fold_text(line) == want


@pytest.mark.parametrize("word", ["c10d", "EXT4-fs", "mlx5_0", "cuda:0", "bf16", "x86_64", "sm_90",
                                  "H100", "sha256", "mlx5_0:1/IB", "llama3"])
def test_identifiers_keep_their_digits(word):
    assert fold_text(f"error in {word} now") == f"error in {word} now"


def test_instance_numbers_after_an_identifier_fold():
    assert fold_text("MatMul_2681 on node-012 step:12 cuda:0,") == "MatMul_<*> on node-<*> step:<*> cuda:<*>,"


def test_lines_stay_aligned_and_binary_lines_get_one_key():
    block = b"a 1\n\x00\x01junk\n\nb 0x1f\n\x7f"
    assert fold_block(block).split(b"\n") == [b"a <*>", BINARY_KEY, b"", b"b <*>", BINARY_KEY]


def test_lines_differing_only_in_variable_tokens_share_a_key():
    rng = random.Random(3)
    keys = {fold_block(f"[Rank {r}] alloc ptr 0x{rng.getrandbits(48):x} uuid {rng.getrandbits(32):08x}"
                       f"-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-a{rng.getrandbits(12):03x}"
                       f"-{rng.getrandbits(48):012x} at {rng.random() * 100:.3f}".encode())
            for r in range(200)}
    assert len(keys) == 1


def test_c_and_python_agree(monkeypatch):
    if fold._c is None:
        pytest.skip("engine._fold is not built")
    rng = random.Random(7)
    alphabet = b"aZx09f_:-.,/ <>\t\xc3\xa9E\x00"
    lines = [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    block = b"\n".join(lines)
    assert fold_block(block).split(b"\n") == [_fold_line(ln) for ln in lines]
    assert [fold.spans(ln) for ln in lines] == [fold._py_spans(ln, *fold.rules()) for ln in lines]


def test_values_read_in_the_fold_match_the_python_twin(monkeypatch):
    lines = [b"iteration 184: loss 2.5 ptr 0x1f step 7", b"\x00bin 12", b"", b"a 99999999999999999999 b 3",
             b"at /x/y/12 uuid 123e4567-e89b-12d3-a456-426614174000 then 42"]
    block = b"\n".join(lines)
    keys, vals = fold.fold_block_values(block, 6)
    assert vals[0].tolist() == [184, 2, 5, -1, 7, -1] and vals[1].tolist() == [-1] * 6
    assert vals[4].tolist() == [-1] * 5 + [426614174000] and vals[3][:2].tolist() == [-1, 3]
    monkeypatch.setattr(fold, "_c", None)
    py_keys, py_vals = fold.fold_block_values(block, 6)
    assert py_keys == keys and py_vals.tolist() == vals.tolist()


def test_key_ids_number_new_keys_by_first_appearance_and_stop_at_room(monkeypatch):
    block = b"a <*>\nb\na <*>\nc\nd\nb"
    results = []
    for c in (fold._c, None):
        if c is None and fold._c is None:
            continue
        monkeypatch.setattr(fold, "_c", c)
        table = {b"b": 0}
        ids, lines, keys = fold.key_ids(block, table, 2)
        results.append((ids.tolist(), lines, keys, table))
    assert results[0] == ([1, 0, 1, 2, -1, 0], [0, 3], [b"a <*>", b"c"], {b"b": 0, b"a <*>": 1, b"c": 2})
    assert all(r == results[0] for r in results)


def _tokenish(rng: random.Random) -> bytes:
    """A piece of a log line: the tokens the fold tells apart, of every length around the scanner's
    64-byte words (long hex, digit runs inside words, chains, paths, control bytes)."""
    kind = rng.randrange(9)
    if kind == 0:
        return b"%x" % rng.getrandbits(rng.choice((8, 32, 64, 200, 260)))
    if kind == 1:
        return b"tmp" + b"".join(rng.choice((b"a", b"7", b"k", b"33")) for _ in range(rng.randint(1, 40)))
    if kind == 2:
        return b"-".join(b"%x" % rng.getrandbits(16) for _ in range(rng.randint(2, 6)))
    if kind == 3:
        return b"/" + b"/".join(rng.choice((b"usr", b"x9", b"..", b"a.b")) for _ in range(rng.randint(1, 5)))
    if kind == 4:
        return bytes(rng.choice(b"\x01\x7f\t\r\x1b") for _ in range(rng.randint(1, 2)))
    if kind == 5:
        return b"w" * rng.randint(50, 70) + b"%d" % rng.randint(0, 99)
    if kind == 6:
        return rng.choice((b"mlx5_0", b"cuda:0", b"c10d", b"EXT4-fs", b"a:b:c1", b"face", b"0x1f", b"3e-05"))
    return bytes(rng.choice(b"aZx09f_:-., <>\xc3") for _ in range(rng.randint(1, 12)))


def test_block_scanner_agrees_with_the_python_twin_across_word_and_segment_edges():
    if fold._c is None:
        pytest.skip("engine._fold is not built")
    rng = random.Random(12)
    lines = [b" ".join(_tokenish(rng) for _ in range(rng.randint(0, 30))) for _ in range(3000)]
    block = b"\n".join(lines)  # about 1 MB: many 4 KiB segments, tokens across their edges
    keys, vals = fold.fold_block_values(block, 8)
    assert keys.split(b"\n") == [_fold_line(ln) for ln in lines]
    for row in rng.sample(range(len(lines)), 300):
        want = [-1] * 8
        for k, (a, b) in enumerate((fold._py_spans(lines[row], *fold.rules()) or [])[:8]):
            tok = lines[row][a:b]
            if b - a <= 18 and tok.isdigit() and tok.isascii():
                want[k] = int(tok)
        assert vals[row].tolist() == want


def test_key_ids_agree_with_the_python_twin_on_repeats_and_a_full_table(monkeypatch):
    rng = random.Random(5)
    block = b"\n".join(rng.choice((b"a <*>", b"b", b"", b"c <*> d", b"e%d" % rng.randrange(50)))
                       for _ in range(5000))
    results = []
    for c in (fold._c, None):
        monkeypatch.setattr(fold, "_c", c)
        table = {b"b": 0}
        ids, lines, keys = fold.key_ids(block, table, 20)
        results.append((ids.tolist(), lines, keys, table))
    assert results[0] == results[1] and -1 in results[0][0]


@pytest.mark.parametrize("data", [b"", b"\n", b"a", b"ab\n\ncd", b"x\n" * 5, b"long " * 300 + b"\nend"])
def test_line_starts_agree_with_the_python_twin(monkeypatch, data):
    got, longest = fold.line_starts(data)
    monkeypatch.setattr(fold, "_c", None)
    want, want_longest = fold.line_starts(data)
    assert got.tolist() == want.tolist() and longest == want_longest
    assert got[-1] == len(data) + 1
