"""The Slack app manifest grants what the bot uses and subscribes to what it listens to."""
from pathlib import Path

import yaml

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "slack-app-manifest.yaml"


def test_manifest_scopes_events_command_and_interactivity():
    m = yaml.safe_load(MANIFEST.read_text())
    scopes = set(m["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "channels:history", "chat:write", "commands", "files:write",
            "usergroups:read"} <= scopes
    events = set(m["settings"]["event_subscriptions"]["bot_events"])
    assert {"app_mention", "message.channels", "message.groups", "message.im"} == events
    assert all(f"{kind}:history" in scopes for kind in ("channels", "groups", "im"))
    assert [c["command"] for c in m["features"]["slash_commands"]] == ["/l4"]
    assert m["settings"]["interactivity"]["is_enabled"] is True
    assert m["settings"]["socket_mode_enabled"] is True
