"""The knowledge base's patterns as the engine's known signatures (kb.known)."""
import re2
from sqlmodel import select

from kb import db as kbdb
from kb.known import WEIGHTS, library_signatures, signatures, stored_signatures
from kb.library import builtin_patterns, library_meta
from kb.models import FaultPattern


def test_every_library_pattern_becomes_a_signature_that_matches_its_example():
    sigs = {s.id: s for s in library_signatures()}
    patterns = builtin_patterns()
    assert set(sigs) == {p["id"] for p in patterns}
    meta = library_meta()
    for p in patterns:
        s = sigs[p["id"]]
        assert s.root == (p["kind"] == "root") and s.weight == WEIGHTS[p["severity"]]
        assert s.explains == tuple(meta[p["id"]]["explains"])
        example = meta[p["id"]].get("example")
        if example:
            assert any(re2.search(rx, example) for rx in s.regexes), p["id"]


def test_templates_and_literals_become_regexes():
    (s,) = signatures([{"id": "x", "signature": [{"template": "widget <*> wedged"}, {"literal": "a.b(c)"}],
                        "kind": "cascade", "severity": "low"}])
    assert not s.root and s.weight == WEIGHTS["low"]
    assert re2.search(s.regexes[0], "widget 3 wedged") and re2.search(s.regexes[1], "x a.b(c) y")


def test_stored_signatures_are_the_enabled_patterns(sqlite_engine):
    with kbdb.session(sqlite_engine) as s:
        row = s.exec(select(FaultPattern).where(FaultPattern.id == "network-fs-not-responding")).one()
        row.enabled = False
        s.add(row)
        s.commit()
        ids = {k.id for k in stored_signatures(s)}
    assert "network-fs-not-responding" not in ids
    assert ids == {p["id"] for p in builtin_patterns()} - {"network-fs-not-responding"}
