"""Files into a Slack thread (reports now, plots later) with ``files_upload_v2``."""
from __future__ import annotations

from dataclasses import dataclass

from slack_sdk import WebClient

from bot.slack.mrkdwn import plain

NAME_LIMIT = 200  # characters of a file's name and title (a job ID from a log folder can be long)


@dataclass(frozen=True)
class OutFile:
    filename: str
    content: bytes | str
    title: str | None = None


def upload_files(client: WebClient, channel: str, thread_ts: str | None, files: list[OutFile],
                 comment: str | None = None) -> list[str]:
    """Upload ``files`` in one share into ``channel`` (in ``thread_ts``'s thread); returns file IDs.
    Names and titles are cut to NAME_LIMIT characters, on one line."""
    if not files:
        return []
    uploads = [{"content": f.content, "filename": plain(f.filename, NAME_LIMIT),
                "title": plain(f.title or f.filename, NAME_LIMIT)} for f in files]
    kwargs: dict = {"channel": channel, "file_uploads": uploads}
    if thread_ts:
        kwargs["thread_ts"] = thread_ts
    if comment:
        kwargs["initial_comment"] = comment
    resp = client.files_upload_v2(**kwargs)
    return [f.get("id") for f in resp.get("files") or [] if f.get("id")]
