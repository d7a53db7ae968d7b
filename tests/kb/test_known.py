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


def test_older_nccl_s_connect_failure_explains_the_unhandled_system_error_after_it(tmp_path):
    """NCCL 2.4's socket transport says "Call to connect failed : Connection timed out" (include/socket.h);
    it is the connect failure that the framework's "ncclCommInitRank failed: unhandled system error"
    reports, so the diagnosis shows it first (public wave 10, Horovod across two hosts)."""
    from engine.diagnose import diagnose
    from tests.helpers.jobs import write_failed_job

    lines = [f"2019-05-28 10:0{k}:00 INFO step {k} loss 2.{k}" for k in range(6)] + [
        "lf-gpu9:2855:2856 [0] include/socket.h:361 NCCL WARN Call to connect failed : Connection timed out",
        "lf-gpu9:2855:2856 [0] NCCL INFO bootstrap.cu:100 -> 2",
        "tensorflow.python.framework.errors_impl.UnknownError: ncclCommInitRank failed: unhandled system "
        "error",
    ]
    job = write_failed_job(tmp_path / "j", {"lf-gpu9/pid285594.log": lines})
    d = diagnose(job, known=library_signatures())
    assert "Call to connect failed" in d.events[0].template
    assert d.events[0].known == "nccl-socket-connect-failed"
