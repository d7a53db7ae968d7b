"""L4 knowledge base: fault patterns, diagnoses, feedback, normal event pools and the matcher.

Depends on ``engine.model`` only (never on ``bot`` or Slack).
"""


class KbError(ValueError):
    """Bad input to a knowledge-base operation (unknown id, invalid pattern, ...)."""
