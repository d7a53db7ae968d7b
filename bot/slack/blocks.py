"""Block Kit messages of the bot: progress, the diagnosis summary with its buttons, errors.

All log text goes through ``mrkdwn`` (escaped, cut); a message never exceeds Slack's limits.
Each function returns ``(text, blocks)``: ``text`` is the notification/fallback text.
"""
from __future__ import annotations

from typing import Any

from bot.slack.mrkdwn import (
    CONTEXT_LIMIT,
    HEADER_LIMIT,
    MAX_BLOCKS,
    SECTION_LIMIT,
    code,
    code_block,
    escape,
    fit,
    plain,
    text_object,
)
from bot.where import stage_basis_phrase
from engine.model import NOTABLE_NODE_SCORE, Diagnosis

ACTION_CONFIRM = "l4_confirm"
ACTION_REJECT = "l4_reject"
ACTION_REPORT = "l4_report"
TOP_EVENTS = 5
TOP_NODES = 5
PHASES = {
    "resolving": "finding the logs",
    "fetching": "downloading the logs",
    "parsing": "parsing log files",
    "analyzing": "analysing events, nodes and iterations",
    "matching": "matching known fault patterns",
    "storing": "saving the diagnosis",
}

Block = dict[str, Any]


def _section(text: str) -> Block:
    return {"type": "section", "text": text_object(fit(text, SECTION_LIMIT))}


def _context(*texts: str) -> Block:
    return {"type": "context",
            "elements": [text_object(fit(t, CONTEXT_LIMIT)) for t in texts if t][:10]}


def _header(text: str) -> Block:
    return {"type": "header", "text": {"type": "plain_text", "text": plain(text, HEADER_LIMIT)}}


def progress_message(label: str, phase: str | None = None, done: int | None = None,
                     total: int | None = None) -> tuple[str, list[Block]]:
    """The message that stands in the thread while a job is analysed (``done``/``total``: files
    while parsing, bytes while fetching)."""
    text = f"Diagnosing {escape(label)}…"
    step = PHASES.get(phase or "", phase or "queued")
    if phase == "parsing" and total:
        step = f"{step}: {done or 0}/{total} files"
    elif phase == "fetching" and done is not None:
        step = f"{step}: {_mb(done)}" + (f" of {_mb(total)}" if total else "")
    return text, [_section(f":hourglass_flowing_sand: Diagnosing *{escape(label)}*…"),
                  _context(escape(step))]


def _mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def error_message(label: str, reason: str) -> tuple[str, list[Block]]:
    """One clear line: why ``label`` could not be diagnosed."""
    line = " ".join(str(reason).split()) or "unknown error"
    text = f"Could not diagnose {escape(label)}: {escape(line)}"
    return fit(text, SECTION_LIMIT), [_section(f":warning: Could not diagnose *{escape(label)}*: "
                                                f"{escape(line)}")]


def _report_context(report: dict | None) -> list[Block]:
    if not report:
        return []
    parts = []
    if report.get("description"):
        parts.append(f"*Failure report:* {escape(report['description'])}")
    if report.get("url"):
        parts.append(f"source: {escape(report['url'])}")
    settings = report.get("settings")
    if isinstance(settings, dict) and settings:
        parts.append("settings: " + ", ".join(f"{escape(k)}={escape(v)}" for k, v in settings.items()))
    return [_context(*parts)] if parts else []


def _match_blocks(d: Diagnosis) -> list[Block]:
    top = d.matches[0]
    out = [_section(f":rotating_light: *Known fault: {escape(top.title)}*\n"
                    f"Category: `{escape(top.category)}` · pattern `{escape(top.pattern_id)}`"
                    + (f"\n*Remediation:* {escape(top.remediation)}" if top.remediation else ""))]
    if top.evidence:
        out.append(_section("*Evidence*\n" + code_block(top.evidence[:3], SECTION_LIMIT - 20)))
    others = [f"{escape(m.title)} (`{escape(m.category)}`)" for m in d.matches[1:4]]
    if others:
        out.append(_context("Also fits: " + "; ".join(others)))
    return out


def _event_blocks(d: Diagnosis) -> list[Block]:
    if not d.events:
        return [_section("No failure-indicating events stood out.")]
    out = [_section("*Failure-indicating events* (most indicative first)")]
    for k, e in enumerate(d.events[:TOP_EVENTS], start=1):
        where = ", ".join(e.nodes[:3]) + (f" +{len(e.nodes) - 3}" if len(e.nodes) > 3 else "")
        facts = f"score {e.score:.2f} · {e.count}×" + (f" · {escape(e.level)}" if e.level else "")
        facts += f" · on {escape(where)}" if where else ""
        example = f"\ne.g. {code(e.examples[0], 600)}" if e.examples else ""
        out.append(_section(f"*{k}.* {code(e.template, 400)}\n{facts}{example}"))
    return out


def _finding_lines(d: Diagnosis) -> list[str]:
    basis = stage_basis_phrase(d)
    lines = [f"*Stage:* {escape(d.stage)}" + (f" _({escape(basis)})_" if basis else "")]
    if d.hang:  # flight-recorder and stack dumps
        lines.append(f"*Hang:* {escape(d.hang.summary[:500])}")
    if d.iterations:
        it = d.iterations[0]
        nodes = f" on {escape(', '.join(it.nodes[:3]))}" if it.nodes else ""
        lines.append(f"*Anomalous iteration:* {it.iteration} (score {it.score:.2f}{nodes})")
    return lines



def _node_block(d: Diagnosis) -> list[Block]:
    shown = [n for n in d.nodes[:TOP_NODES] if n.score >= NOTABLE_NODE_SCORE]
    if not shown:
        return [_section("*Suspicious nodes:* none stands out")] if d.nodes else []
    rows = []
    for n in shown:
        ev = f" — {code(n.events[0], 200)}" if n.events else ""
        rows.append(f"• `{escape(n.node)}` {n.score:.2f}{ev}")
    return [_section("*Suspicious nodes* (score)\n" + "\n".join(rows))]


def summary_actions(diagnosis_id: int) -> Block:
    value = str(diagnosis_id)
    return {"type": "actions", "block_id": f"l4_actions_{value}", "elements": [
        {"type": "button", "action_id": ACTION_CONFIRM, "style": "primary", "value": value,
         "text": {"type": "plain_text", "text": "Confirm root cause"}},
        {"type": "button", "action_id": ACTION_REJECT, "value": value,
         "text": {"type": "plain_text", "text": "Not the cause"}},
        {"type": "button", "action_id": ACTION_REPORT, "value": value,
         "text": {"type": "plain_text", "text": "Full report"}},
    ]}


def summary_message(d: Diagnosis, diagnosis_id: int) -> tuple[str, list[Block]]:
    """The diagnosis in the thread: a matched pattern, or the engine's findings; then the buttons."""
    if d.status == "matched" and d.matches:
        text = f"{d.job_id}: known fault {d.matches[0].title} ({d.matches[0].category})"
        body = _match_blocks(d)
    else:
        lead = d.events[0].template if d.events else "no failure-indicating events"
        text = f"{d.job_id}: analysed; top event: {lead}"
        body = [_section("No confirmed fault pattern fits; here is what the engine found.")]
        body += _event_blocks(d)
    body.append(_section("\n".join(_finding_lines(d))))
    body += _node_block(d)
    body += _report_context(d.report)
    if d.job_label:
        body.append(_context(f"job.json calls it {code(d.job_label, 200)}"))
    st = d.stats
    body.append(_context(f"{st.files} files · {st.lines:,} lines · {st.bytes / 1e6:.1f} MB · "
                         f"{st.templates} templates · {st.seconds:.1f} s · diagnosis #{diagnosis_id}"))
    blocks = [_header(f"L4 diagnosis of {d.job_id}"), *body][: MAX_BLOCKS - 1]
    blocks.append(summary_actions(diagnosis_id))
    return fit(escape(text), SECTION_LIMIT), blocks


def note_message(text: str) -> tuple[str, list[Block]]:
    """A short line in a thread (``text`` is mrkdwn the caller has escaped)."""
    return fit(text, SECTION_LIMIT), [_section(text)]
