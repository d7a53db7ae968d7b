from __future__ import annotations

import time

import pytest

from engine.model import TemplateStat
from kb import KbError
from kb.bench_matcher import make_templates
from kb.library import builtin_patterns
from kb.matcher import Matcher
from kb.signatures import template_to_regex, validate_signature

ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
WATCHDOG = ("[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE,"
            " Timeout(ms)=600000) ran for 600123 milliseconds before timing out.")


@pytest.fixture(scope="module")
def lib() -> Matcher:
    return Matcher(builtin_patterns())


def test_root_cause_outranks_cascades(lib: Matcher) -> None:
    templates = [TemplateStat(template=f"watchdog {i} <*>", count=1, examples=[WATCHDOG.format(r=i)],
                              first_seen="2026-05-01T10:00:00Z") for i in range(120)]
    templates.append(TemplateStat(template="RuntimeError: CUDA error: uncorrectable ECC error encountered",
                                  count=1, examples=[ECC], first_seen="2026-05-01T10:05:00Z"))
    found = lib.match_templates(templates)
    assert [m.pattern_id for m in found] == ["cuda-uncorrectable-ecc", "nccl-watchdog-timeout"]
    assert found[0].category == "hardware/accelerator" and found[0].remediation
    assert found[0].evidence == [ECC]
    assert len(found[1].evidence) == 3 and all("Watchdog caught" in e for e in found[1].evidence)


def test_severity_then_earliest_evidence() -> None:
    pats = [
        {"id": "low-one", "title": "L", "category": "framework", "kind": "root", "severity": "low",
         "signature": ["alpha failure"]},
        {"id": "crit-one", "title": "C", "category": "framework", "kind": "root", "severity": "critical",
         "signature": ["beta failure"]},
        {"id": "crit-two", "title": "C2", "category": "framework", "kind": "root", "severity": "critical",
         "signature": ["gamma failure"]},
    ]
    found = Matcher(pats).match_lines(["gamma failure", "alpha failure", "beta failure"])
    assert [m.pattern_id for m in found] == ["crit-two", "crit-one", "low-one"]


def test_template_text_used_when_no_examples_and_disabled_skipped() -> None:
    pats = [{"id": "on", "title": "On", "category": "platform",
             "signature": [{"template": "job <*> was preempted"}]},
            {"id": "off", "title": "Off", "category": "platform", "enabled": False,
             "signature": ["preempted"]}]
    m = Matcher(pats)
    assert len(m) == 1
    found = m.match_templates([TemplateStat(template="job <*> was preempted", count=4)])
    assert [x.pattern_id for x in found] == ["on"]
    assert found[0].evidence == ["job <*> was preempted"]


def test_one_set_scan_per_example_line(lib: Matcher, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = lib._set.Match
    counting = type("S", (), {"Match": lambda self, line: calls.append(line) or real(line)})()
    monkeypatch.setattr(lib, "_set", counting)
    templates = make_templates(50)
    lib.match_templates(templates)
    assert len(calls) == sum(len(t.examples) for t in templates)


def test_catastrophic_regex_cannot_hang() -> None:
    evil = r"(a+)+$"
    text = "a" * 50 + "b"
    t0 = time.perf_counter()
    try:
        validate_signature([evil])
    except KbError:
        pass  # rejected is fine too
    m = Matcher([{"id": "evil", "title": "Evil", "category": "framework", "signature": [evil]}])
    found = m.match_lines([text] * 1000)
    assert found == []
    assert time.perf_counter() - t0 < 1.0


@pytest.mark.parametrize("sig, reason", [
    ([""], "non-empty"),
    (["(?<=x)y"], "RE2"),
    ([".*"], "empty string"),
    (["error"], "too broad"),
    (["lm loss"], "too broad"),
    (["iteration"], "too broad"),
    ([{"template": "<*> <*>"}], "unspecific"),
    ([{"shape": "x"}], "kind"),
    ([], "non-empty"),
])
def test_validation_rejects_bad_signatures(sig: list, reason: str) -> None:
    with pytest.raises(KbError, match=reason):
        validate_signature(sig)


def test_template_regex_matches_raw_lines() -> None:
    t = "NCCL WARN NET/IB : Got completion from peer <*> with error <*>, opcode <*>"
    import re2

    rx = re2.compile(template_to_regex(t))
    assert rx.search("node1:12:34 [0] NCCL WARN NET/IB :  Got completion from peer 10.0.0.2<5012> with"
                     " error 12, opcode 0, len 0, vendor err 129")
    assert rx.search(t)  # the template itself
    assert not rx.search("NCCL WARN NET/IB : Got completion from peer")
    assert validate_signature([{"template": t}]) == [{"template": t}]


def test_match_speed_is_small(lib: Matcher) -> None:
    templates = make_templates(2000)
    t0 = time.process_time()  # CPU seconds: the same on a loaded machine, where wall time is not
    found = lib.match_templates(templates)
    elapsed = time.process_time() - t0
    assert {m.pattern_id for m in found} >= {"cuda-uncorrectable-ecc", "xid-79-fallen-off-bus"}
    assert elapsed < 2.0  # ~25 ms on a 2-core machine; generous bound for slow CI


def test_a_bad_pattern_is_named_without_re2_log_noise(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(KbError, match=r"^mine: regex does not compile under RE2: '\(unclosed': missing \)"):
        Matcher([{"id": "mine", "title": "t", "category": "platform", "signature": ["(unclosed"]}])
    assert capfd.readouterr().err == ""  # RE2's C++ logging goes to fd 2 unless log_errors is off
