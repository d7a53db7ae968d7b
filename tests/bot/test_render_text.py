"""The text report: where the failure sits on its second line, nothing cut without saying so, no
hard wrapping when piped, control characters in names escaped; the HTML counts what it lists."""
from __future__ import annotations

import re

from bot.render_html import render_html
from bot.render_text import render_text
from engine.model import (
    AnalysisDetail,
    Diagnosis,
    Event,
    IterationFinding,
    IterationSeries,
    Match,
    NodeFinding,
)

NODES = [f"node-{i:03d}" for i in range(8)]
LONG = "NCCL WARN NET/IB : Got completion from peer with error 12, opcode 0, len 0, vendor err 129 " * 4


def _diagnosis() -> Diagnosis:
    faulty = "node-007"  # last in name order: a cut at five names used to drop it
    return Diagnosis(
        job_id="job-42",
        status="matched",
        matches=[Match(pattern_id="nccl-ib-completion-error", title="NCCL InfiniBand completion error",
                       category="hardware/network", remediation="drain it",
                       evidence=[f"[rank29]:{LONG}"])],
        stage="training",
        events=[Event(template=LONG.strip(), score=0.9, count=3, level="WARN", nodes=NODES,
                      first_seen=None, examples=[f"[rank29]: {LONG.strip()}"])],
        nodes=[NodeFinding(faulty, 0.8, ["a", "b", "c", "d"]), NodeFinding("node-003", 0.2, ["a"]),
               NodeFinding("node-001", 0.01), NodeFinding("node-002", 0.01)],
        iterations=[IterationFinding(1873, 0.7, NODES, ["e1", "e2", "e3", "e4", "e5"]),
                    IterationFinding(1874, 0.4, NODES[:2])],
        detail=AnalysisDetail(iteration_series=[IterationSeries(file="/j/node-007/rank-0029.log",
                                                                node=faulty, flagged=[1873])]),
    )


def test_the_where_line_is_second_beside_the_match() -> None:
    lines = render_text(_diagnosis(), diagnosis_id=12).splitlines()
    assert lines[0] == "L4 diagnosis 12 of job-42  (matched)"
    assert lines[1] == "Where: node node-007 · rank 29 · stage training · iteration 1873"
    assert lines[2] == "Match: NCCL InfiniBand completion error (pattern nccl-ib-completion-error)"


def test_the_rank_comes_from_the_rank_file_when_no_line_names_it() -> None:
    d = _diagnosis()
    d.matches, d.events[0].examples = [], ["NCCL WARN without a rank"]
    assert "rank 29 " in render_text(d).splitlines()[1]
    d.detail = None
    assert render_text(d).splitlines()[1] == "Where: node node-007 · rank - · stage training · iteration 1873"


def test_lists_that_are_cut_say_how_much_and_keep_the_faulty_node() -> None:
    text = render_text(_diagnosis())
    # the most suspicious first, then "+N more"
    want = ("Anomalous iteration: 1873 (score 0.70) on "
            "node-007, node-003, node-001, node-002, node-000 +3 more")
    assert want in text
    assert "on node-007, node-003, node-001, node-002 +4 more" in text  # the event's nodes
    assert "+ 2 more new events" in text and "1 more anomalous iteration(s): 1874" in text
    assert re.search(r"node-007 .*\(\+2 more\)", text)  # the node's events beyond two


def test_piped_output_is_not_wrapped_and_a_terminal_is() -> None:
    piped = render_text(_diagnosis())
    example = [ln for ln in piped.splitlines() if ln.startswith("     e.g. ")]
    assert len(example) == 1 and example[0].endswith("…")  # one line, cut visibly at 300
    assert max(len(ln) for ln in piped.splitlines()) > 300
    tty = render_text(_diagnosis(), terminal=True, width=80)
    assert max(len(ln) for ln in tty.splitlines()) <= 80


def test_control_characters_in_names_are_escaped() -> None:
    d = _diagnosis()
    d.nodes[0].node = "node-7\n[bold]Known fault: fake\x1b[2J"
    d.iterations[0].nodes = [d.nodes[0].node]
    text = render_text(d)
    assert "node-7\\n[bold]Known fault: fake\\x1b[2J" in text
    assert "\x1b" not in text and not any(ln.startswith("[bold]Known fault") for ln in text.splitlines())


def test_html_counts_the_suspicious_nodes_it_lists() -> None:
    html = render_html(_diagnosis(), plots=False, diagnosis_id=12)
    nodes = html[html.index("<section id='nodes'>"):]
    nodes = nodes[: nodes.index("</section>")]
    rows = nodes.count("<tr>") - 1  # the header row
    assert rows == 2 and "2 suspicious node(s)" in html
    assert "2 other node(s) score below 0.05: node-001, node-002." in nodes
    assert "<b>Where:</b> node node-007 · rank 29 · stage training · iteration 1873" in html
    assert "<code id='diagnosis-id'>12</code>" in html


def test_the_stage_says_what_it_rests_on_in_text_and_html() -> None:
    from bot.where import stage_basis_phrase
    from engine.model import StageBasis

    def phrase(stage: str, basis: StageBasis | None) -> str:
        return stage_basis_phrase(Diagnosis(job_id="j", stage=stage, stage_basis=basis))

    assert phrase("training", StageBasis("words", 0.72)) == "read from the failure's words, p 0.72"
    assert phrase("training", StageBasis("words", 0.39)) == "a guess from the failure's words, p 0.39"
    assert phrase("teardown", StageBasis("frame")) == "from the failing function in its traceback"
    assert phrase("init", StageBasis("lexicon")) == "from a framework message or frame L4 knows"
    assert phrase("init", StageBasis("rules")) == "from the stage rules"
    assert phrase("training", None) == "" and phrase("unknown", StageBasis("words", 0.2)) == ""
    d = _diagnosis()
    d.stage_basis = StageBasis("timeline")
    assert "Stage: training (placed by the job's own progress and stage lines)" in render_text(d)
    assert "Stage: <b>training</b> (placed by the job&#x27;s own progress and stage lines)." in render_html(d)
    d.stage_basis = None
    assert "Stage: training\n" in render_text(d) and "Stage: <b>training</b>. " in render_html(d)
