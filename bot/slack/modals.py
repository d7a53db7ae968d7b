"""The "Confirm root cause" modal: built from a stored diagnosis, read back on submission.

The signature choices are the diagnosis' events, then the events of its suspicious nodes and
anomalous iterations (deduplicated, at most 10: Slack's limit for checkboxes). Option values are
indexes into that list, which is recomputed from the stored diagnosis on submission, so no
template has to fit into Slack's 150-character option values.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from bot.slack.mrkdwn import code, escape, fit, plain, text_object
from engine.model import CATEGORIES

CALLBACK_CONFIRM = "l4_confirm_view"
MAX_CHOICES = 10
TITLE_MAX = 200
REMEDIATION_MAX = 3000
SUSPICIOUS = 0.5


@dataclass(frozen=True)
class ConfirmForm:
    diagnosis_id: int
    channel: str | None
    thread_ts: str | None
    title: str
    category: str
    remediation: str
    events: list[str]


def signature_choices(diagnosis: dict[str, Any]) -> list[str]:
    """Event templates an SRE can choose the signature from, most indicative first."""
    seen: list[str] = [e["template"] for e in diagnosis.get("events") or [] if e.get("template")]
    for n in diagnosis.get("nodes") or []:
        seen += [t for t in n.get("events") or [] if t]
    for it in diagnosis.get("iterations") or []:
        seen += [t for t in it.get("events") or [] if t]
    return list(dict.fromkeys(seen))[:MAX_CHOICES]


def _prefilled(diagnosis: dict[str, Any], choices: list[str]) -> list[int]:
    """The events of the most suspicious node (the likely root cause), else the top event."""
    nodes = [n for n in diagnosis.get("nodes") or [] if float(n.get("score") or 0) >= SUSPICIOUS]
    if nodes:
        picked = [choices.index(t) for t in nodes[0].get("events") or [] if t in choices]
        if picked:
            return picked[:3]
    return [0] if choices else []


def _title_from(template: str) -> str:
    text = re.sub(r"\s+", " ", template.replace("<*>", "…")).strip(" …:")
    return plain(text, 80)


def _option(text: str, value: str) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": plain(text, 75)}, "value": value}


def _input(block_id: str, label: str, element: dict[str, Any], hint: str | None = None) -> dict[str, Any]:
    block = {"type": "input", "block_id": block_id, "label": {"type": "plain_text", "text": label},
             "element": element}
    if hint:
        block["hint"] = {"type": "plain_text", "text": plain(hint, 150)}
    return block


def confirm_view(diagnosis: dict[str, Any], diagnosis_id: int, channel: str | None,
                 thread_ts: str | None) -> dict[str, Any]:
    """The modal that turns a diagnosis into a confirmed fault pattern."""
    choices = signature_choices(diagnosis)
    picked = _prefilled(diagnosis, choices)
    options = [_option(t, str(i)) for i, t in enumerate(choices)]
    events_el: dict[str, Any] = {"type": "checkboxes", "action_id": "value", "options": options}
    if picked:
        events_el["initial_options"] = [options[i] for i in picked]
    title_el = {"type": "plain_text_input", "action_id": "value", "max_length": TITLE_MAX}
    if picked:
        title_el["initial_value"] = _title_from(choices[picked[0]])
    job = str(diagnosis.get("job_id") or "")
    listing = "\n".join(f"*{i}.* {code(plain(t, 280), 280)}" for i, t in enumerate(choices))
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": text_object(fit(
            f"Diagnosis #{diagnosis_id} of *{escape(job)}*. The events you tick become the pattern's "
            "signature: the next job that shows them is named with this pattern at once.", 3000))},
        _input("title", "Title", title_el, "What failed, in a few words"),
        _input("category", "Category", {
            "type": "static_select", "action_id": "value",
            "placeholder": {"type": "plain_text", "text": "Root-cause category"},
            "options": [_option(c, c) for c in CATEGORIES]}),
        _input("remediation", "Remediation", {
            "type": "plain_text_input", "action_id": "value", "multiline": True,
            "max_length": REMEDIATION_MAX}, "What to do when this happens again"),
    ]
    if choices:
        blocks.append({"type": "section", "text": text_object(fit("*Events*\n" + listing, 3000))})
        blocks.append(_input("events", "Signature events", events_el, "Tick the events that form the fault"))
    return {
        "type": "modal", "callback_id": CALLBACK_CONFIRM,
        "private_metadata": json.dumps({"d": diagnosis_id, "c": channel, "t": thread_ts}),
        "title": {"type": "plain_text", "text": "Confirm root cause"},
        "submit": {"type": "plain_text", "text": "Archive pattern"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": blocks,
    }


def _value(values: dict[str, Any], block: str) -> Any:
    return (values.get(block) or {}).get("value") or {}


def read_confirm(view: dict[str, Any], diagnosis: dict[str, Any]) -> ConfirmForm:
    """The submitted form; ``diagnosis`` is the stored diagnosis named in the view's metadata."""
    meta = json.loads(view.get("private_metadata") or "{}")
    values = (view.get("state") or {}).get("values") or {}
    choices = signature_choices(diagnosis)
    picked = []
    for opt in _value(values, "events").get("selected_options") or []:
        idx = str(opt.get("value", ""))
        if idx.isdigit() and int(idx) < len(choices):
            picked.append(choices[int(idx)])
    category = (_value(values, "category").get("selected_option") or {}).get("value") or ""
    return ConfirmForm(
        diagnosis_id=int(meta["d"]), channel=meta.get("c"), thread_ts=meta.get("t"),
        title=(_value(values, "title").get("value") or "").strip(),
        category=category,
        remediation=(_value(values, "remediation").get("value") or "").strip(),
        events=picked,
    )


def metadata_diagnosis_id(view: dict[str, Any]) -> int | None:
    try:
        return int(json.loads(view.get("private_metadata") or "{}")["d"])
    except (ValueError, KeyError, TypeError):
        return None
