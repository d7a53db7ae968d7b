"""The summary stays inside Slack's limits whatever the logs hold, and pings no one."""
import json

from bot.slack.blocks import progress_message, summary_message
from bot.slack.mrkdwn import MAX_BLOCKS
from engine.model import Diagnosis, Event, IterationFinding, Match, NodeFinding

HUGE = "<!channel> " + "x" * 20_000


def _huge() -> Diagnosis:
    return Diagnosis(
        job_id="job-<!here>", status="matched",
        matches=[Match(f"p{i}", HUGE, "platform", HUGE, [HUGE] * 5) for i in range(60)],
        events=[Event(HUGE, 0.9, 3, "ERROR", [f"n{i}" for i in range(40)], None, [HUGE]) for _ in range(60)],
        nodes=[NodeFinding(f"node-{i}", 0.5, [HUGE]) for i in range(60)],
        iterations=[IterationFinding(7, 0.7, ["<@U1>"], [HUGE])],
        report={"description": HUGE, "url": "https://r/1", "settings": {"model": HUGE}})


def _mrkdwn_texts(node: object) -> list[str]:
    """Texts Slack parses for mentions and links (plain_text fields show literally, never ping)."""
    if isinstance(node, dict):
        if node.get("type") == "mrkdwn":
            return [node["text"]]
        return [t for v in node.values() for t in _mrkdwn_texts(v)]
    if isinstance(node, list):
        return [t for v in node for t in _mrkdwn_texts(v)]
    return []


def _check_limits(blocks: list[dict]) -> None:
    assert len(blocks) <= MAX_BLOCKS
    for b in blocks:
        if b["type"] == "section":
            assert len(b["text"]["text"]) <= 3000
        if b["type"] == "header":
            assert len(b["text"]["text"]) <= 150
        if b["type"] == "context":
            assert all(len(e["text"]) <= 3000 for e in b["elements"]) and len(b["elements"]) <= 10


def test_limits_and_escaping_matched_and_analyzed():
    for status in ("matched", "analyzed"):
        d = _huge()
        d.status = status
        text, blocks = summary_message(d, 42)
        _check_limits(blocks)
        dumped = "\n".join(_mrkdwn_texts(blocks)) + text
        assert "<!channel>" not in dumped and "<!here>" not in dumped and "<@U1>" not in dumped
        assert len(text) <= 3000
        assert blocks[-1]["type"] == "actions"
        assert [e["value"] for e in blocks[-1]["elements"]] == ["42"] * 3
        assert "Confirm" in blocks[-1]["elements"][0]["text"]["text"]
    assert "&lt;!channel&gt;" in json.dumps(summary_message(_huge(), 1)[1])


def test_report_details_and_progress():
    d = Diagnosis(job_id="job-1", report={"description": "NCCL timeout at step 10", "url": "https://r/1",
                                          "settings": {"model": "llama", "nodes": 64}})
    text, blocks = summary_message(d, 1)
    ctx = " ".join(e["text"] for e in [b for b in blocks if b["type"] == "context"][0]["elements"])
    assert "NCCL timeout at step 10" in ctx and "model=llama" in ctx and "nodes=64" in ctx
    text, blocks = progress_message("job-<1>", "parsing", 3, 8)
    assert "3/8 files" in json.dumps(blocks) and "<1>" not in text + json.dumps(blocks)
    _, blocks = progress_message("job-1", "fetching", 12_300_000, 40_000_000)
    assert "downloading the logs: 12.3 MB of 40.0 MB" in json.dumps(blocks)
    _, blocks = progress_message("job-1", "fetching", 500_000, None)
    assert "downloading the logs: 0.5 MB\"" in json.dumps(blocks)


def test_the_stage_says_what_it_rests_on():
    from engine.model import StageBasis

    def stage_text(d: Diagnosis) -> str:
        return " ".join(_mrkdwn_texts(summary_message(d, 1)[1]))

    guess = Diagnosis(job_id="j", stage="checkpointing", stage_basis=StageBasis("words", 0.31))
    assert "*Stage:* checkpointing _(a guess from the failure's words, p 0.31)_" in stage_text(guess)
    placed = Diagnosis(job_id="j", stage="training", stage_basis=StageBasis("timeline"))
    assert "*Stage:* training _(placed by the job's own progress and stage lines)_" in stage_text(placed)
    bare = stage_text(Diagnosis(job_id="j", stage="training"))
    assert "*Stage:* training" in bare and "_(" not in bare
