from bot.slack.modals import confirm_view, read_confirm, signature_choices
from engine.model import CATEGORIES

LONG = "A" * 400 + " <*>"
DIAG = {
    "job_id": "job-1",
    "events": [{"template": "watchdog timeout <*>"}, {"template": LONG}],
    "nodes": [{"node": "n1", "score": 0.9, "events": ["disk full on <*>", LONG]},
              {"node": "n2", "score": 0.1, "events": ["other"]}],
    "iterations": [{"iteration": 3, "events": [f"e{i}" for i in range(20)]}],
}


def test_view_fits_slack_and_prefills_the_suspicious_nodes_events():
    view = confirm_view(DIAG, 7, "C1", "1.2")
    assert len(view["title"]["text"]) <= 24 and view["private_metadata"]
    blocks = {b.get("block_id"): b for b in view["blocks"]}
    opts = blocks["events"]["element"]["options"]
    assert len(opts) == 10 and all(len(o["text"]["text"]) <= 75 and len(o["value"]) <= 150 for o in opts)
    assert [o["value"] for o in blocks["events"]["element"]["initial_options"]] == ["2", "1"]
    assert blocks["title"]["element"]["initial_value"] == "disk full on"
    assert [o["value"] for o in blocks["category"]["element"]["options"]] == list(CATEGORIES)


def test_submission_maps_indexes_back_to_full_templates():
    view = confirm_view(DIAG, 7, "C1", "1.2")
    view["state"] = {"values": {
        "title": {"value": {"value": "  Disk full  "}},
        "category": {"value": {"selected_option": {"value": "hardware/storage"}}},
        "remediation": {"value": {"value": "Clean /tmp"}},
        "events": {"value": {"selected_options": [{"value": "1"}, {"value": "99"}, {"value": "x"}]}},
    }}
    form = read_confirm(view, DIAG)
    assert (form.diagnosis_id, form.channel, form.thread_ts) == (7, "C1", "1.2")
    assert form.title == "Disk full" and form.category == "hardware/storage" and form.events == [LONG]
    assert signature_choices(DIAG)[1] == LONG


def test_backticks_in_events_cannot_break_out_of_the_code_span():
    diag = {"job_id": "job-1", "events": [{"template": "bad `rm -rf` *bold* <!here> ```block```"}]}
    view = confirm_view(diag, 1, "C1", "1.2")
    listing = next(b["text"]["text"] for b in view["blocks"]
                   if b["type"] == "section" and b["text"]["text"].startswith("*Events*"))
    line = listing.splitlines()[1]
    assert line.count("`") == 2 and line.endswith("`") and "&lt;!here&gt;" in line
