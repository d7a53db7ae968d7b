"""Who may confirm root causes: the configured SREs (user IDs and/or a user group's members).

The user group's members are fetched with ``usergroups.users.list`` and cached for a few minutes;
when Slack cannot be asked, the last known members are used (none on the first failure).
"""
from __future__ import annotations

import logging
import threading
import time

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from bot.config import Settings
from bot.slack.client import slack_error

log = logging.getLogger(__name__)
GROUP_CACHE_SECONDS = 300.0


class SrePolicy:
    def __init__(self, settings: Settings, ttl: float = GROUP_CACHE_SECONDS) -> None:
        self.users = frozenset(settings.sre_users)
        self.usergroup = settings.sre_usergroup
        self.ttl = ttl
        self._lock = threading.Lock()
        self._members: frozenset[str] = frozenset()
        self._fetched_at: float | None = None

    @property
    def configured(self) -> bool:
        return bool(self.users or self.usergroup)

    def _group_members(self, client: WebClient) -> frozenset[str]:
        with self._lock:
            fresh = self._fetched_at is not None and time.monotonic() - self._fetched_at < self.ttl
            if fresh or not self.usergroup:
                return self._members
            try:
                resp = client.usergroups_users_list(usergroup=self.usergroup)
                self._members = frozenset(resp.get("users") or [])
            except (SlackApiError, SlackClientError, OSError) as exc:
                err = slack_error(exc)
                log.warning("cannot list the members of user group %s: %s", self.usergroup, err)
            self._fetched_at = time.monotonic()
            return self._members

    def may_confirm(self, client: WebClient, user_id: str) -> bool:
        if user_id in self.users:
            return True
        return bool(self.usergroup) and user_id in self._group_members(client)

    def refusal(self) -> str:
        """The ephemeral explanation for someone who may not confirm."""
        if not self.configured:
            return ("Confirming root causes is switched off: no SREs are configured "
                    "(set L4_SRE_USERS or L4_SRE_USERGROUP for the bot).")
        who = []
        if self.users:
            who.append(", ".join(f"<@{u}>" for u in sorted(self.users)))
        if self.usergroup:
            who.append("a member of the SRE user group")
        return ("Only SREs can confirm a root cause, so that the knowledge base stays trustworthy. "
                f"Ask {' or '.join(who)} to confirm it; you can still use *Not the cause* and *Full report*.")
