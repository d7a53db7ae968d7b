"""Template mining (engine/parse.py): Drain3 with capped leaves."""

from engine.parse import LEAF_CAP, LEAF_HARD_CAP, new_miner


def _template(miner, message: str) -> str:
    return miner.add_log_message(message)["template_mined"]


def test_a_one_word_message_is_its_own_template_however_many_came_before():
    miner = new_miner()
    for i in range(3 * LEAF_CAP):  # one-word messages all share one Drain leaf: it fills up
        _template(miner, f"Word{chr(65 + i % 26)}{chr(65 + i // 26)}")
    assert _template(miner, "MemoryError") == "MemoryError"
    assert _template(miner, "Killed") == "Killed"
    assert _template(miner, "MemoryError") == "MemoryError"  # the same cluster again
    assert len({miner.add_log_message(w)["cluster_id"] for w in ("MemoryError", "MemoryError")}) == 1


def test_a_one_word_variable_stays_in_drains_tree():
    miner = new_miner()
    assert _template(miner, "<*>") == "<*>"
    assert "<*>" not in miner.drain.singles and miner.drain.get_clusters_ids_for_seq_len(1)


def test_a_full_leaf_never_absorbs_a_line_that_shares_no_word_with_its_templates():
    miner = new_miner()
    # first words with digits all go down Drain's wildcard branch: one leaf for these lines
    lines = [f"x{i} y{i} alpha{chr(97 + i % 26)}{chr(97 + i // 26)} tail" for i in range(LEAF_CAP)]
    for line in lines:
        _template(miner, line)
    assert _template(miner, "q9 r9 MemoryError raised") == "q9 r9 MemoryError raised"
    # a line sharing a word ("tail") with a full leaf's template still joins it
    assert _template(miner, "x99 y99 zeta tail").endswith("tail")
    assert "zeta" not in _template(miner, "x98 y98 eta tail")


def test_past_the_hard_cap_the_closest_template_takes_the_line():
    miner = new_miner()
    for i in range(LEAF_HARD_CAP):
        _template(miner, f"x{i} y{i} w{i}a w{i}b")  # nothing shared: each gets a cluster
    clusters = len(miner.drain.id_to_cluster)
    _template(miner, "x1000 y1000 unrelated words")
    assert len(miner.drain.id_to_cluster) == clusters  # bounded: it joined one


def test_a_nan_never_joins_a_template_where_the_others_print_a_number():
    """`loss nan` in a line worded like every progress line before it is the failure (public: nanoGPT's
    "iter 3010: loss nan, time …"): it keeps a template of its own, and numbers never join that one."""
    miner = new_miner()
    number = [_template(miner, f"iter <*>: loss {v}, time <*>ms") for v in ("<*>", "<*>")]
    assert number == ["iter <*>: loss <*>, time <*>ms"] * 2
    assert _template(miner, "iter <*>: loss nan, time <*>ms") == "iter <*>: loss nan, time <*>ms"
    assert _template(miner, "iter <*>: loss <*>, time <*>ms") == "iter <*>: loss <*>, time <*>ms"
    assert _template(miner, "iter <*>: loss nan, time <*>ms") == "iter <*>: loss nan, time <*>ms"
    assert _template(miner, "step=<*> loss=<*> lr=<*>") == "step=<*> loss=<*> lr=<*>"
    assert _template(miner, "step=<*> loss=<*> lr=inf") == "step=<*> loss=<*> lr=inf"  # `name=inf` too
    assert len(miner.drain.id_to_cluster) == 4


def test_words_that_hold_nan_or_inf_are_no_keep_apart_values():
    from engine.parse import _apart

    assert _apart("INFO inference info nano Finance loss".split()) == ()
    assert _apart(["{'loss':", "nan,", "'grad_norm':", "inf}"]) == (1, 3)
