import os
import pickle

import pytest

from engine.flightrec import DumpError, parse_dump, read_dumps
from engine.safepickle import UnsafePickle, loads_plain
from tests.helpers.fr_dumps import dump, healthy_until, write


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_a_hostile_pickle_runs_no_code(tmp_path):
    marker = tmp_path / "pwned"
    data = pickle.dumps({"version": "2.10", "entries": [_Evil(str(marker))]})
    with pytest.raises(UnsafePickle, match="posix.mkdir|os.mkdir"):
        loads_plain(data)
    with pytest.raises(DumpError, match="refused"):
        parse_dump(data, "x", 0, None)
    assert not marker.exists()


def test_plain_data_loads():
    assert loads_plain(pickle.dumps({"a": (1, "b"), "c": [None, True, 2.5, b"x"]})) == \
        {"a": (1, "b"), "c": [None, True, 2.5, b"x"]}


def test_read_dumps_keeps_the_good_and_names_the_bad(tmp_path):
    write(tmp_path, 0, dump(healthy_until(3), world=3))
    write(tmp_path, 1, dump(healthy_until(3), world=3), fmt="json", name="node-b_nccl_trace_rank_1.json")
    (tmp_path / "nccl_trace_rank_2").write_bytes(pickle.dumps(_Evil(str(tmp_path / "pwned"))))
    (tmp_path / "nccl_trace_rank_3").write_bytes(b"\x00garbage")
    dumps, bad = read_dumps(sorted(tmp_path.iterdir()))
    assert [d.rank for d in dumps] == [0, 1]
    assert dumps[1].host == "node-b"
    assert len(dumps[0].entries) == 3 and dumps[0].pg_ranks["0"] == [0, 1, 2]
    assert len(bad) == 2 and all(b.count("\n") == 0 for b in bad)
    assert any("nccl_trace_rank_2: refused" in b for b in bad)
    assert any("nccl_trace_rank_3: not a flight-recorder dump" in b for b in bad)
    assert not (tmp_path / "pwned").exists()


def test_size_cap(tmp_path, monkeypatch):
    from engine import rules

    data = dict(rules.load("hang"))
    data["flight_recorder"] = {**data["flight_recorder"], "max_bytes": 100}
    monkeypatch.setattr(rules, "load", lambda name: data if name == "hang" else rules.load.__wrapped__(name))
    import engine.flightrec as fr

    monkeypatch.setattr(fr, "load", rules.load)
    write(tmp_path, 0, dump(healthy_until(30), world=1))
    dumps, bad = fr.read_dumps([tmp_path / "nccl_trace_rank_0"])
    assert dumps == [] and "over 100 bytes" in bad[0]
