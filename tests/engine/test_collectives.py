from engine.collectives import analyze_dumps
from engine.flightrec import parse_dump
from tests.helpers.fr_dumps import dump, entry, healthy_until


def _dumps(per_rank: dict[int, dict]):
    import pickle

    return [parse_dump(pickle.dumps(d), f"nccl_trace_rank_{r}", r, None) for r, d in per_rank.items()]


def test_a_rank_that_never_reached_the_collective_is_the_culprit():
    world = 8
    ranks = {r: dump(healthy_until(10), world=world) for r in range(world) if r != 5}
    ranks[5] = dump(healthy_until(9, pending=False), world=world)
    v = analyze_dumps(_dumps(ranks))
    assert v.kind == "missing" and v.culprits == [5]
    assert v.sequence_id == 10 and v.collective == "nccl:all_reduce"
    assert v.waiting == [0, 1, 2, 3, 4, 6, 7]
    assert v.last_sequence[5] == 9 and v.last_sequence[0] == 10


def test_an_op_size_or_dtype_mismatch_names_the_minority():
    world = 4
    for odd, what in (({"op": "nccl:broadcast"}, "op"), ({"sizes": [[2048]]}, "size"),
                      ({"dtypes": ["BFloat16"]}, "dtype")):
        ranks = {r: dump(healthy_until(6), world=world) for r in range(world)}
        ranks[2]["entries"][-1] = entry(6, state="scheduled", **odd)
        v = analyze_dumps(_dumps(ranks))
        assert v.kind == "mismatch" and v.culprits == [2] and v.sequence_id == 6
        assert v.detail.startswith(f"{what} mismatch")


def test_ranks_without_a_dump_are_evidence():
    ranks = {r: dump(healthy_until(7), world=4) for r in (0, 1, 3)}
    v = analyze_dumps(_dumps(ranks))
    assert v.kind == "no_dump" and v.culprits == [2] and v.ranks_without_dump == [2]


def test_a_laggard_waiting_in_another_group_is_followed_to_the_root():
    # ranks 0-3 form subgroup "1"; rank 1 never enters the subgroup collective, ranks 0, 2, 3 wait in it;
    # ranks 4-7 went on to the default group's next collective and wait there for 0-3
    sub = {"1": {"name": "1", "desc": "dp", "ranks": "[0, 1, 2, 3]"}}
    ranks = {}
    for r in range(8):
        entries = [entry(s, record_id=2 * s) for s in range(1, 6)]
        if r < 4:
            entries += [entry(s, pg="1", desc="dp", record_id=2 * s + 1) for s in range(1, 4)]
            if r != 1:
                entries.append(entry(4, pg="1", desc="dp", state="scheduled", record_id=20))
        else:
            entries.append(entry(6, state="scheduled", record_id=21))
        ranks[r] = dump(entries, world=8, extra_pgs=sub)
    v = analyze_dumps(_dumps(ranks))
    assert v.kind == "missing" and v.culprits == [1]
    assert v.process_group == "1" and v.sequence_id == 4


def test_wrapped_ring_buffers_are_compared_over_the_common_window():
    # rank 0's buffer starts at 50, rank 1's at 40: ops before 50 on rank 1 are not a mismatch
    r0 = dump([entry(s) for s in range(50, 61)], world=2)
    r1 = dump([entry(s, op="nccl:reduce_scatter" if s < 45 else "nccl:all_reduce") for s in range(40, 61)],
              world=2)
    assert analyze_dumps(_dumps({0: r0, 1: r1})) is None or \
        analyze_dumps(_dumps({0: r0, 1: r1})).kind != "mismatch"


def test_nccl_states_name_the_rank_that_never_started():
    ranks = {}
    for r in range(4):
        entries = healthy_until(3)
        entries[-1] = entry(3, state="scheduled" if r == 3 else "started")
        ranks[r] = dump(entries, world=4)
    v = analyze_dumps(_dumps(ranks))
    assert v.kind == "not_started" and v.culprits == [3]


def test_everyone_waiting_names_no_rank():
    ranks = {r: dump(healthy_until(4), world=4) for r in range(4)}
    v = analyze_dumps(_dumps(ranks))
    assert v.kind == "all_waiting" and v.culprits == [] and v.waiting == [0, 1, 2, 3]


def test_empty_buffers_give_no_verdict():
    assert analyze_dumps(_dumps({0: dump([], world=2), 1: dump([], world=2)})) is None
