"""Signal patterns: faults without an error line, recognised from per-node findings."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.bench.generate import generate_suite
from engine.model import ParsedJob, TemplateStat
from kb import library
from kb.bench_signals import evaluate_suite
from kb.matcher import Matcher
from kb.signals import load_signals, match_signals, suspect_node

TIMEOUT = ("[rank{r}]:[E0217 23:45:39.06 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
           "operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600067 "
           "milliseconds before timing out.")
MATCHER = Matcher(library.builtin_patterns())


def _job(nodes: list[str], timed_out: list[str], last_ts: dict[str, str], last_iter: dict[str, int],
         extra: list[TemplateStat] = ()) -> ParsedJob:
    tpl = TemplateStat(template="Watchdog caught collective operation timeout <*>", count=len(timed_out),
                       nodes={n: 1 for n in timed_out}, examples=[TIMEOUT.format(r=0)])
    return ParsedJob(job_id="j", templates=[tpl, *extra], node_counts={n: {0: 1} for n in nodes},
                     node_last_ts=last_ts, node_last_iter=last_iter)


NODES = ["n1", "n2", "n3", "n4"]
END = "2026-02-17T23:45:40"


def test_silent_node_is_named_with_its_silence_and_the_timeouts() -> None:
    job = _job(NODES, ["n1", "n2", "n4"], {"n1": END, "n2": END, "n3": "2026-02-17T23:20:27", "n4": END},
               {n: 49 for n in NODES} | {"n3": 48})
    found = match_signals(job, MATCHER)
    assert [m.pattern_id for m in found] == ["signal-silent-node-peers-time-out"]
    assert found[0].category == "hardware/node" and suspect_node(found) == "n3"
    ev = found[0].evidence
    assert ev[0].startswith("node n3; silent 1513 s") and "reported no timeout itself" in ev[0]
    assert ev[1] == "3 of 3 other node(s) report a timeout or lost peer"
    assert ev[2].startswith("timeout: ") and "Watchdog caught" in ev[2]


def test_straggler_keeps_logging_but_is_behind() -> None:
    job = _job(NODES, NODES, {n: END for n in NODES}, {"n1": 50, "n2": 50, "n3": 47, "n4": 50})
    found = match_signals(job, MATCHER)
    assert [m.pattern_id for m in found] == ["signal-straggler-node"] and suspect_node(found) == "n3"
    assert "3 iteration(s) behind the others: last iteration 47, median 50" in found[0].evidence[0]
    assert "kept logging" in found[0].evidence[0]


def test_every_node_times_out_and_none_is_silent() -> None:
    job = _job(NODES, NODES, {n: END for n in NODES}, {n: 50 for n in NODES})
    found = match_signals(job, MATCHER)
    assert [m.pattern_id for m in found] == ["signal-all-ranks-time-out"]
    assert found[0].category == "hardware/network" and suspect_node(found) is None
    xid = TemplateStat(template="NVRM: Xid <*>", count=1, nodes={"n2": 1},
                       examples=["NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"])
    with_root = _job(NODES, NODES, {n: END for n in NODES}, {n: 50 for n in NODES}, [xid])
    assert match_signals(with_root, MATCHER) == []  # a line names the root: no job-wide signal


GLOO = ("[default1]:[rank5]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
        "unbound_buffer.cc:78] Timed out waiting 8000ms for recv operation to complete")


def test_one_rank_without_a_timeout_names_its_node() -> None:
    # two ranks per node log the gloo timeout twice each, but on n2 only one rank does
    tpl = TemplateStat(template="RuntimeError: [<*>:<*>] Timed out waiting <*> for <*> operation to complete",
                       count=14, nodes={"n1": 4, "n2": 2, "n3": 4, "n4": 4}, examples=[GLOO])
    job = ParsedJob(job_id="j", templates=[tpl], node_counts={n: {0: 1} for n in NODES},
                    node_last_ts={n: END for n in NODES})
    found = match_signals(job, MATCHER)
    assert [m.pattern_id for m in found] == ["signal-quiet-rank-peers-time-out"]
    assert suspect_node(found) == "n2"
    assert "logged 2 timeout line(s), each other node 4" in found[0].evidence[0]
    even = ParsedJob(job_id="j", templates=[TemplateStat(template=tpl.template, count=16, examples=[GLOO],
                                                         nodes=dict.fromkeys(NODES, 4))],
                     node_counts={n: {0: 1} for n in NODES}, node_last_ts={n: END for n in NODES})
    assert [m.pattern_id for m in match_signals(even, MATCHER)] == ["signal-all-ranks-time-out"]


def test_a_node_with_an_error_of_its_own_is_not_the_silent_one() -> None:
    oom = TemplateStat(template="torch.OutOfMemoryError: CUDA out of memory <*>", count=1, nodes={"n3": 1},
                       examples=["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"])
    job = _job(NODES, ["n1", "n2", "n4"], {n: END for n in NODES}, {n: 50 for n in NODES}, [oom])
    assert match_signals(job, MATCHER) == []


def test_an_unknown_exception_on_some_nodes_keeps_the_job_wide_signal_quiet() -> None:
    exc = TemplateStat(template="ValueError: Failed to read the checkpoint file <*>", count=2,
                       nodes={"n2": 2},
                       examples=["ValueError: Failed to read the checkpoint file /ckpt/rank_3.ckpt"])
    job = _job(NODES, NODES, {n: END for n in NODES}, {n: 50 for n in NODES}, [exc])
    assert match_signals(job, MATCHER) == []


def test_no_signal_without_timeouts_or_with_two_silent_nodes() -> None:
    quiet = _job(NODES, [], {n: END for n in NODES}, {n: 50 for n in NODES})
    assert match_signals(quiet, MATCHER) == []
    two = _job(NODES, ["n1", "n2"], {n: END for n in NODES}, {n: 50 for n in NODES})
    assert match_signals(two, MATCHER) == []


def test_signal_data_is_checked() -> None:
    doc = load_signals()
    assert {s["id"] for s in doc["signals"]} == {
        "signal-silent-node-peers-time-out", "signal-straggler-node", "signal-quiet-rank-peers-time-out",
        "signal-all-ranks-time-out"}
    ids = {p["id"] for p in library.builtin_patterns()}
    assert set(doc["peer_patterns"]) <= ids


def _generated(factory: pytest.TempPathFactory, kinds: list[str], cases: int, seed: int) -> Path:
    out = factory.mktemp("-".join(kinds))
    generate_suite(out, cases=cases, seed=seed, nodes=(4, 6), ranks_per_node=(2, 3), iterations=(24, 36),
                   history_jobs=1, kinds=kinds)
    return out


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generated(tmp_path_factory, ["node_hang", "node_crash"], 4, 7)


def test_generated_silent_node_jobs_name_the_right_node_and_history_stays_quiet(suite: Path) -> None:
    rep = evaluate_suite(suite)
    assert rep["total"]["cases"] == 4 and rep["total"]["right"] == 4, rep["wrong"]
    assert rep["total"]["history"] == 4 and rep["total"]["history_fired"] == 0


def test_triage_reports_the_signal_when_no_line_names_a_root(suite: Path, tmp_path: Path) -> None:
    from bot.triage import TriageRequest, triage

    for case in json.loads((suite / "cases.json").read_text()):
        if case["kind"] == "node_hang":
            break
    d = suite / case["path"]
    truth = json.loads((d / "truth.json").read_text())
    res = triage(TriageRequest(job=str(d / "failed"), history=[str(d / "history" / "h1")],
                               database_url=f"sqlite:///{tmp_path / 'kb.db'}"))
    ids = [m.pattern_id for m in res.diagnosis.matches]
    assert "signal-silent-node-peers-time-out" in ids and res.diagnosis.status == "matched"
    assert suspect_node(res.diagnosis.matches) == truth["faulty_nodes"][0]


def test_bench_signals_bad_suite_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kb.bench_signals import main

    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read") and err.count("\n") == 1


@pytest.fixture(scope="module")
def slow_suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _generated(tmp_path_factory, ["straggler", "fabric_stall"], 6, 3)


def test_generated_straggler_and_fabric_stall_jobs_get_their_signal(slow_suite: Path) -> None:
    rep = evaluate_suite(slow_suite)
    assert rep["kinds"]["straggler"]["right"] == 3 == rep["kinds"]["straggler"]["triage_right"], rep["wrong"]
    assert rep["kinds"]["fabric_stall"]["triage_right"] == 3, rep["wrong"]  # history filters benign errors
    assert rep["total"]["history"] == 6 and rep["total"]["history_fired"] == 0


def test_one_slow_rank_among_healthy_ones_names_its_node() -> None:
    names = ["n1", "n1", "n2", "n2", "n3", "n3", "n4", "n4"]
    files = {f"/j/{n}/rank-{i}.log": n for i, n in enumerate(names)}
    last = {p: 50 for p in files} | {"/j/n3/rank-5.log": 46}
    job = _job(NODES, NODES, {n: END for n in NODES}, {n: 50 for n in NODES})
    job.file_nodes = files
    job.iterations = {p: [(it - 1, ()), (it, ())] for p, it in last.items()}
    found = match_signals(job, MATCHER)
    assert [m.pattern_id for m in found] == ["signal-straggler-node"] and suspect_node(found) == "n3"
    assert "4 iteration(s) behind the others (rank-5.log)" in found[0].evidence[0]



@pytest.mark.parametrize("case", ["straggler-ddp-1", "straggler-megatron-2"])
def test_real_straggler_logs_name_the_slow_ranks_node(case: str) -> None:
    from engine.parse import parse_jobs

    d = Path(__file__).parents[1] / "fixtures" / "realrun" / case
    truth = json.loads((d / "truth.json").read_text())
    found = match_signals(parse_jobs([d / "failed"])[0], MATCHER)
    assert [m.pattern_id for m in found] == ["signal-quiet-rank-peers-time-out"]
    assert suspect_node(found) == truth["faulty_nodes"][0]
    assert any("Timed out waiting" in e for e in found[0].evidence)
