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
