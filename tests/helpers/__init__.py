"""Shared test helpers: job-folder builders (and, later, the fake Slack Web API)."""
