"""L4 front ends: the `l4` command line and the Slack bot, over one triage service."""
