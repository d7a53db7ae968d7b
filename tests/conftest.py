"""Fixtures shared by every test folder: a throwaway PostgreSQL server (skipped without binaries)."""
from tests.helpers.postgres import postgres_server, postgres_url  # noqa: F401 - pytest fixtures
