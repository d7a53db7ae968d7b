"""Job IDs: one safe path segment, and the configured pattern."""
import pytest

from bot.sources.jobids import is_safe_job_id, matches_pattern, validate_job_id
from engine.ingest import JobError


@pytest.mark.parametrize("text", ["job-0042", "A.b_c-1", "12345"])
def test_safe_ids(text: str) -> None:
    assert is_safe_job_id(text) and validate_job_id(f" {text} ") == text


@pytest.mark.parametrize(
    "text",
    ["..", "../etc", "job/../x", "/etc/passwd", ".hidden", "a..b", "job-1/rank", "C:\\x", "", "a\x00b",
     "x" * 200],
)
def test_traversal_and_odd_ids_refused(text: str) -> None:
    assert not is_safe_job_id(text)
    with pytest.raises(JobError, match="not a valid job ID"):
        validate_job_id(text)


def test_configured_pattern() -> None:
    assert matches_pattern("job-7", r"job-\d+") and not matches_pattern("job-7x", r"job-\d+")
    with pytest.raises(JobError, match="L4_JOB_ID_PATTERN"):
        validate_job_id("run-7", r"job-\d+")
    with pytest.raises(JobError, match="not a valid job ID"):  # a lax pattern never lets traversal in
        validate_job_id("../x", r".*")
