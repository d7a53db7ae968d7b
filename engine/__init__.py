"""L4 engine: pure log analysis (no Slack, no database)."""
