"""The bot end to end over signed HTTP requests against the shared fake Slack Web API."""
from __future__ import annotations

import http.client
import json
import threading
from pathlib import Path
from urllib.parse import urlsplit

from sqlmodel import select

from bot.triage import triage
from engine.ingest import JobError
from kb import db as kbdb
from kb.models import FaultPattern, Feedback
from tests.helpers.fake_slack import BOT_ID, BOT_USER_ID
from tests.helpers.jobs import make_job
from tests.helpers.slack_bot import SECRET, BotHarness
from tests.helpers.slack_requests import event_body, mention_event, message_event, post_signed
from tests.helpers.wait import WAIT

SRE = "USRE0001"
GROUP_SRE = "USRE0002"
DEV = "UDEV0001"


def _option_state(view: dict, block_id: str) -> dict:
    block = next(b for b in view["blocks"] if b.get("block_id") == block_id)
    return block["element"]


def test_message_summary_confirm_modal_archive_then_second_job_matched(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root, sre_users=[SRE]) as bot:
        asked = message_event("C1", DEV, "job-0001 just died, anyone?")
        assert bot.event(asked).status == 200

        summary = bot.wait_summary("job-0001")
        progress = bot.slack.calls_to("chat.postMessage")[0]
        assert progress.params["thread_ts"] == asked["ts"] and "Diagnosing" in progress.params["text"]
        assert bot.thread_of(summary) == asked["ts"]  # the progress message became the summary
        steps = [json.dumps(c.params["blocks"]) for c in bot.slack.calls_to("chat.update")]
        assert any("parsing log files: 6/6 files" in t for t in steps), steps
        assert any("analysing events" in t for t in steps)
        texts = json.dumps(summary.params)
        assert "MyStore client lost lease" in texts and "Confirm root cause" in texts
        assert "&lt;!channel&gt;" in texts and "<!channel>" not in texts and "<@U0BOSS>" not in texts
        buttons = [e for b in summary.params["blocks"] if b["type"] == "actions" for e in b["elements"]]
        assert {b["value"] for b in buttons} == {buttons[0]["value"]} and buttons[0]["value"].isdigit()

        assert bot.click("l4_confirm", summary, SRE).status == 200
        (opened,) = bot.slack.wait_for_call("views.open")
        view = opened.params["view"]
        assert view["title"]["text"] == "Confirm root cause"
        events = _option_state(view, "events")
        assert "MyStore" in events["initial_options"][0]["text"]["text"]
        reply = bot.submit(view, SRE, {
            "title": {"type": "plain_text_input", "value": "MyStore lease lost"},
            "category": {"type": "static_select", "selected_option": {"value": "platform"}},
            "remediation": {"type": "plain_text_input", "value": "Restart the MyStore proxy on the node."},
            "events": {"type": "checkboxes", "selected_options": events["initial_options"]},
        })
        assert reply.status == 200 and not reply.body, reply.body
        said = bot.wait_post_containing("confirmed the root cause")
        assert said.params["thread_ts"] == asked["ts"] and f"<@{SRE}>" in said.params["text"]
        assert "mystore-lease-lost" in said.params["text"]

        with kbdb.session(bot.services.knowledge.engine) as s:
            p = s.get(FaultPattern, "mystore-lease-lost")
            assert p is not None and p.source == "confirmed" and p.created_by == SRE and p.created_at
            assert [f.verdict for f in s.exec(select(Feedback))] == ["confirm"]
        # a second Confirm on the same diagnosis opens no form: the root cause is archived already
        bot.click("l4_confirm", summary, SRE)
        bot.slack.wait_for_call("chat.postEphemeral", where=lambda c: "already archived" in c.params["text"])
        assert len(bot.slack.calls_to("views.open")) == 1
        # and a form submitted twice (an old form left open) archives nothing more
        again_reply = bot.submit(view, SRE, {
            "title": {"type": "plain_text_input", "value": "MyStore lease lost"},
            "category": {"type": "static_select", "selected_option": {"value": "platform"}},
            "remediation": {"type": "plain_text_input", "value": "Restart the MyStore proxy on the node."},
            "events": {"type": "checkboxes", "selected_options": events["initial_options"]},
        })
        assert json.loads(again_reply.body)["errors"]["title"].startswith("already confirmed by USRE0001")
        with kbdb.session(bot.services.knowledge.engine) as s:
            assert s.get(FaultPattern, "mystore-lease-lost-2") is None

        second = message_event("C1", DEV, "and now job-0002 :(")
        bot.event(second)
        again = bot.wait_summary("job-0002")
        text = json.dumps(again.params)
        assert "Known fault: MyStore lease lost" in text and "mystore-lease-lost" in text
        assert "Restart the MyStore proxy" in text and "<!channel>" not in text
        with kbdb.session(bot.services.knowledge.engine) as s:
            stored = bot.services.knowledge.diagnosis(int(again.params["blocks"][-1]["elements"][0]["value"]))
            assert stored.data["status"] == "matched" and stored.channel == "C1"
            assert stored.thread_ts == second["ts"]

        # Confirming a match records the verdict on the existing pattern; no new pattern
        bot.click("l4_confirm", again, SRE)
        bot.wait_post_containing("failed with the known fault")
        assert len(bot.slack.calls_to("views.open")) == 1


def test_not_the_cause_and_full_report(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root) as bot:
        bot.event(message_event("C1", DEV, "job-0001"))
        summary = bot.wait_summary("job-0001")
        bot.click("l4_reject", summary, DEV)
        said = bot.wait_post_containing("not the cause")
        assert said.params["thread_ts"] == bot.thread_of(summary)
        bot.click("l4_reject", summary, DEV)  # said twice: recorded once, told privately
        bot.slack.wait_for_call("chat.postEphemeral", where=lambda c: "already" in c.params["text"])

        bot.slack.wait_for(lambda s: any(u.completed and u.filename.endswith(".png")
                                         for u in s.uploads.values()))
        pngs = [u for u in bot.slack.uploads.values() if u.filename.endswith(".png")]
        assert all(u.thread_ts == bot.thread_of(summary) and u.content.startswith(b"\x89PNG") for u in pngs)
        assert any(u.filename.endswith("node-scores.png") for u in pngs)

        bot.click("l4_report", summary, DEV)
        bot.slack.wait_for(lambda s: any(u.completed and u.filename.endswith(".html")
                                         for u in s.uploads.values()))
        (up,) = [u for u in bot.slack.uploads.values() if u.filename.endswith(".html")]
        assert up.completed and up.thread_ts == bot.thread_of(summary) and up.channel == "C1"
        assert up.filename.endswith(".html") and b"MyStore client lost lease" in up.content
        assert b"<!channel>" not in up.content
        assert b"id='diagnosis-id'>" in up.content  # the ID `l4 patterns confirm` takes


def test_an_expired_form_trigger_is_told_not_dropped(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root, sre_users=[SRE]) as bot:
        bot.event(message_event("C1", DEV, "job-0001"))
        summary = bot.wait_summary("job-0001")
        bot.slack.fail_next("views.open", status=200, error="expired_trigger_id", retry_after=None)
        bot.click("l4_confirm", summary, SRE)
        bot.slack.wait_for_call("chat.postEphemeral", where=lambda c: "expired_trigger" in c.params["text"])


def test_only_sres_may_confirm(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root, sre_users=[SRE], sre_usergroup="SSRES",
                    usergroups={"SSRES": [GROUP_SRE]}) as bot:
        bot.event(message_event("C1", DEV, "job-0001"))
        summary = bot.wait_summary("job-0001")
        bot.click("l4_confirm", summary, DEV)
        (refusal,) = bot.slack.wait_for_call("chat.postEphemeral")
        assert refusal.params["user"] == DEV and "Only SREs" in refusal.params["text"]
        assert not bot.slack.calls_to("views.open")
        bot.click("l4_confirm", summary, GROUP_SRE)  # a member of the SRE user group
        bot.slack.wait_for_call("views.open")
        bot.click("l4_confirm", summary, GROUP_SRE)
        bot.slack.wait_for_call("views.open", count=2)
        assert len(bot.slack.calls_to("usergroups.users.list")) == 1  # cached
        # a forged submission from a non-SRE is refused in the modal, nothing archived
        view = bot.slack.calls_to("views.open")[0].params["view"]
        reply = bot.submit(view, DEV, {"title": {"value": "x"}})
        assert reply.json()["response_action"] == "errors"


def test_same_job_twice_while_running_is_one_analysis(tmp_path: Path, log_root: Path):
    gate, calls = threading.Event(), []

    def slow_triage(req, **kw):
        calls.append(req.job)
        assert gate.wait(30)
        return triage(req, **kw)

    with BotHarness(tmp_path, log_root=log_root, run_triage=slow_triage) as bot:
        first = message_event("C1", DEV, "job-0001 failed")
        bot.event(first)
        bot.slack.wait_for(lambda s: len(calls) == 1)
        bot.event(message_event("C2", SRE, "looking at job-0001"))
        pointer = bot.wait_post_containing("already being diagnosed")
        assert pointer.params["channel"] == "C2" and f"<@{SRE}>" in pointer.params["text"]
        assert f"/archives/C1/p{first['ts'].replace('.', '')}" in pointer.params["text"]
        gate.set()
        bot.wait_summary("job-0001")
        assert bot.services.diagnoser.wait_idle(WAIT)
        assert calls == ["job-0001"]
        # once finished, asking again runs a new analysis
        bot.event(message_event("C1", DEV, "job-0001 again?"))
        bot.slack.wait_for(lambda s: len(calls) == 2)


def test_replies_in_the_thread_of_a_diagnosis_start_nothing_unless_asked(tmp_path: Path, log_root: Path):
    calls: list[str] = []

    def counting(req, **kw):
        calls.append(req.job)
        return triage(req, **kw)

    with BotHarness(tmp_path, log_root=log_root, run_triage=counting) as bot:
        first = message_event("C1", DEV, "job-0001 failed")
        bot.event(first)
        bot.wait_summary("job-0001")
        assert bot.services.diagnoser.wait_idle(WAIT)
        bot.event(message_event("C1", SRE, "job-0001 ran on the bad rack", thread_ts=first["ts"]))
        bot.event(message_event("C1", SRE, "and job-0002 too?", thread_ts=first["ts"]))  # a new job: runs
        bot.slack.wait_for(lambda s: len(calls) == 2)
        assert bot.services.diagnoser.wait_idle(WAIT)
        assert calls == ["job-0001", "job-0002"]
        bot.event(mention_event("C1", SRE, f"<@{BOT_USER_ID}> job-0001 once more", thread_ts=first["ts"]))
        bot.slack.wait_for(lambda s: len(calls) == 3)


def test_ignores_bots_own_edits_and_subtypes(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root) as bot:
        bot.event(message_event("C1", BOT_USER_ID, "job-0001", bot_id=BOT_ID))
        bot.event(message_event("C1", "UOTHERBOT", "job-0001", bot_id="BOTHER"))
        bot.event(message_event("C1", DEV, "job-0001", subtype="message_changed"))
        bot.event(message_event("C1", DEV, "job-0001", subtype="channel_join"))
        bot.event(message_event("C1", DEV, "no job mentioned here"))
        bot.event(message_event("C1", DEV, f"<@{BOT_USER_ID}> job-0001"))  # left to app_mention
        bot.event(mention_event("C1", DEV, f"<@{BOT_USER_ID}> what's up?"))
        bot.wait_post_containing("Give me a job ID")
        assert bot.services.diagnoser.wait_idle(WAIT)
        assert not [c for c in bot.slack.calls_to("chat.postMessage") if "Diagnosing" in str(c.params)]
        bot.event(mention_event("C1", DEV, f"<@{BOT_USER_ID}> please look at job-0002"))
        bot.wait_summary("job-0002")


def test_unknown_job_and_link_handling(tmp_path: Path, log_root: Path):
    asked: list[str] = []

    def no_fetch(req, **kw):  # report links are resolved elsewhere (bot.resolve); never fetch in tests
        asked.append(req.job)
        if "://" in req.job:
            raise JobError(f"cannot fetch {req.job}: test")
        return triage(req, **kw)

    with BotHarness(tmp_path, log_root=log_root, report_hosts=["reports.example.com"],
                    run_triage=no_fetch) as bot:
        bot.event(message_event("C1", DEV, "job-9999 is gone"))  # overheard, no such folder: nothing
        bot.event(mention_event("C1", DEV, f"<@{BOT_USER_ID}> job-9999 is gone"))  # asked: a helpful reply
        update = bot.wait_update_containing("Could not diagnose")
        line = update.params["text"]
        assert "job-9999" in line and "unknown job" in line and "\n" not in line
        assert "Traceback" not in json.dumps(update.params)
        # a link to another host is not a failure report; a link to a report host is
        bot.event(message_event("C1", DEV, "see <https://elsewhere.example/r/1|this>"))
        bot.event(message_event("C1", DEV, "see <https://reports.example.com/r/7|report 7>"))
        bot.wait_update_containing("cannot fetch https://reports.example.com/r/7")
        assert bot.services.diagnoser.wait_idle(WAIT)
        assert asked == ["job-9999", "https://reports.example.com/r/7"]
        assert "elsewhere" not in json.dumps([c.params for c in bot.slack.calls])


def test_rate_limited_post_is_retried(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root) as bot:
        bot.slack.fail_next("chat.postMessage", retry_after=1)
        bot.event(message_event("C1", DEV, "job-0001"))
        bot.wait_summary("job-0001")
        assert [c.status for c in bot.slack.calls_to("chat.postMessage")][:2] == [429, 200]


def _announce_huge_body(url: str) -> int:
    """Send only the headers of a 2 MiB POST and return the status the server answers with."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        conn.putrequest("POST", parts.path)
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(2 << 20))
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


def test_bad_signature_is_refused(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root) as bot:
        body = event_body(message_event("C1", DEV, "job-0001"))
        assert post_signed(bot.url, "not-the-secret", body).status == 401
        assert post_signed(bot.url, SECRET, body, signature="v0=" + "0" * 64).status == 401
        assert post_signed(bot.url, SECRET, body, timestamp=1).status == 401  # replayed, 1970
        assert _announce_huge_body(bot.url) == 413  # refused before anything reads the body
        assert bot.services.diagnoser.wait_idle(WAIT)
        assert not bot.slack.calls_to("chat.postMessage")


XID = ("NVRM: Xid (PCI:0000:06:00): 79, pid=1234, name=python, GPU has fallen off the bus.",)


def test_not_the_cause_three_times_flags_the_matched_pattern(tmp_path: Path, log_root: Path):
    make_job(log_root / "job-xid", nodes=3, fault_node=1, fault_lines=XID)
    with BotHarness(tmp_path, log_root=log_root) as bot:
        bot.event(message_event("C1", DEV, "job-xid", subtype="thread_broadcast", thread_ts="1.5"))
        summary = bot.wait_summary("job-xid")
        assert "Known fault" in json.dumps(summary.params) and bot.thread_of(summary) == "1.5"
        for n, user in enumerate(("U1", "U2", "U3"), start=1):
            bot.click("l4_reject", summary, user)
            bot.slack.wait_for_call("chat.postMessage", where=lambda c: "not the cause" in str(c.params),
                                    count=n)
        last = bot.slack.calls_to("chat.postMessage")[-1].params["text"]
        assert "flagged for review" in last


def test_modal_errors_point_at_the_field(tmp_path: Path, log_root: Path):
    with BotHarness(tmp_path, log_root=log_root, sre_users=[SRE]) as bot:
        bot.event(message_event("C1", DEV, "job-0001"))
        bot.click("l4_confirm", bot.wait_summary("job-0001"), SRE)
        view = bot.slack.wait_for_call("views.open")[0].params["view"]
        good = {"title": {"value": "Lease lost"}, "category": {"selected_option": {"value": "platform"}},
                "remediation": {"value": "r"},
                "events": {"selected_options": _option_state(view, "events")["initial_options"]}}
        r = bot.submit(view, SRE, {**good, "events": {"selected_options": []}})
        assert r.json() == {"response_action": "errors", "errors": {"events": "Tick at least one event."}}
        r = bot.submit(view, SRE, {**good, "title": {"value": "T" * 301}})
        assert list(r.json()["errors"]) == ["title"] and "300" in r.json()["errors"]["title"]
        r = bot.submit(view, SRE, {**good, "category": {"selected_option": {"value": "hardware/gpu"}}})
        assert list(r.json()["errors"]) == ["category"]
        with kbdb.session(bot.services.knowledge.engine) as s:
            assert not s.exec(select(FaultPattern).where(FaultPattern.source == "confirmed")).all()
