"""Feedback and job identity through the real bot: a matched diagnosis is confirmed once however
often it is clicked; job.json's job_id labels a job and never names it."""
from __future__ import annotations

import json
from pathlib import Path

from sqlmodel import select

from kb import db as kbdb
from kb.models import DiagnosisRecord, Feedback
from tests.helpers.jobs import make_job
from tests.helpers.slack_bot import BotHarness
from tests.helpers.slack_requests import message_event

SRE = "USRE0001"
XID = ("NVRM: Xid (PCI:0000:06:00): 79, pid=1234, name=python, GPU has fallen off the bus.",)


def test_three_confirm_clicks_on_a_matched_diagnosis_are_one_row_and_one_post(tmp_path: Path,
                                                                              log_root: Path) -> None:
    make_job(log_root / "job-xid", nodes=3, fault_node=1, fault_lines=XID)
    with BotHarness(tmp_path, log_root=log_root, sre_users=[SRE]) as bot:
        bot.event(message_event("C1", "UDEV0001", "job-xid"))
        summary = bot.wait_summary("job-xid")
        for _ in range(3):
            assert bot.click("l4_confirm", summary, SRE).status == 200
        bot.slack.wait_for_call("chat.postEphemeral", count=2,
                                where=lambda c: "already confirmed" in c.params["text"])
        posts = [c for c in bot.slack.calls_to("chat.postMessage") if "confirmed that" in str(c.params)]
        assert len(posts) == 1
        with kbdb.session(bot.services.knowledge.engine) as s:
            assert len(s.exec(select(Feedback).where(Feedback.verdict == "confirm")).all()) == 1


def test_job_json_job_id_labels_the_job_and_never_names_it(tmp_path: Path, log_root: Path) -> None:
    for name, stated in (("job-0100", "job-0001"), ("job-0101", "j" * 5000)):
        job = make_job(log_root / name, nodes=3, fault_node=1)
        manifest = json.loads((job / "job.json").read_text())
        (job / "job.json").write_text(json.dumps({**manifest, "job_id": stated}))
    with BotHarness(tmp_path, log_root=log_root) as bot:
        bot.event(message_event("C1", "UDEV0001", "job-0100 and job-0101 failed"))
        first, second = bot.wait_summary("job-0100"), bot.wait_summary("job-0101")
        assert "job.json calls it `job-0001`" in json.dumps(first.params)
        assert "L4 diagnosis of job-0001" not in json.dumps(bot.slack.calls_to("chat.update")[-1].params)
        assert "j" * 201 not in json.dumps(second.params)
        bot.click("l4_report", second, "UDEV0001")
        bot.slack.wait_for(lambda s: any(u.completed and u.filename.endswith(".html")
                                         for u in s.uploads.values()))
        (up,) = [u for u in bot.slack.uploads.values() if u.filename.endswith(".html")]
        assert up.title == "L4 report: job-0101" and up.filename.startswith("l4-job-0101-")
        with kbdb.session(bot.services.knowledge.engine) as s:
            stored = sorted(r.job_id for r in s.exec(select(DiagnosisRecord)))
            assert stored == ["job-0100", "job-0101"]
            label = json.loads(s.exec(select(DiagnosisRecord).where(DiagnosisRecord.job_id == "job-0101"))
                               .one().json_text)["job_label"]
            assert len(label) == 200 and label.endswith("…")


def test_reports_show_the_label_beside_the_asked_id() -> None:
    from bot.render_html import render_html
    from bot.render_text import render_text
    from engine.model import Diagnosis, diagnosis_from_dict

    d = Diagnosis(job_id="job-0100", job_label="job-<b>0001")
    assert "job.json calls it job-<b>0001" in render_text(d)
    assert "job.json calls it <code>job-&lt;b&gt;0001</code>" in render_html(d)
    assert diagnosis_from_dict(d.to_dict()).job_label == "job-<b>0001"
    assert "job_label" not in Diagnosis(job_id="job-1").to_dict()  # optional: absent when none
