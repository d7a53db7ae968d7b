from pathlib import Path

from bot.config import Settings
from bot.slack.refs import explicit_job_ref, find_job_refs, is_report_link


def _settings(tmp_path: Path, **kw) -> Settings:
    return Settings(log_root=str(tmp_path), report_hosts=["reports.example.com"], **kw)


def test_job_ids_folders_and_report_links(tmp_path: Path):
    (tmp_path / "pretrain_7b_run3").mkdir()
    s = _settings(tmp_path)
    text = ("<@UBOT> job-0042 and job-0042 again, see <https://reports.example.com/r/9?a=1&amp;b=2|report>, "
            "<https://elsewhere.example/r/1>, pretrain_7b_run3. <#C123|general> job-x.")
    assert find_job_refs(text, s) == ["https://reports.example.com/r/9?a=1&b=2", "job-0042",
                                      "pretrain_7b_run3"]  # job-x: no digit, not a job ID by default
    assert find_job_refs("nothing here, not even job- or ../etc", s) == []
    assert find_job_refs("run-1234", _settings(tmp_path, job_id_pattern=r"run-\d+")) == ["run-1234"]
    assert find_job_refs("job-0001", Settings(log_root="s3://bucket/logs")) == ["job-0001"]


def test_chat_that_only_looks_like_a_job_id_starts_nothing(tmp_path: Path):
    (tmp_path / "job-0042").mkdir()
    s = _settings(tmp_path)
    chat = "a job-related outage, job-specific settings; job-0042 and job-0099 failed"
    assert find_job_refs(chat, s) == ["job-0042", "job-0099"]  # addressed to the bot: both, 0099 unknown
    assert find_job_refs(chat, s, passive=True) == ["job-0042"]  # overheard: only what exists locally
    remote = Settings(log_root="https://logs.example.com/jobs/")
    assert find_job_refs(chat, remote, passive=True) == ["job-0042", "job-0099"]  # cannot check: pattern


def test_report_link_check_is_by_host_only():
    hosts = ["reports.example.com"]
    assert is_report_link("https://Reports.Example.com/x", hosts)
    assert not is_report_link("https://reports.example.com.evil.io/x", hosts)
    assert not is_report_link("ftp://reports.example.com/x", hosts)
    assert not is_report_link("https://user@evil.io/?reports.example.com", hosts)


def test_explicit_ref_never_names_a_path(tmp_path: Path):
    s = _settings(tmp_path)
    assert explicit_job_ref("job-0042", s) == "job-0042"
    assert explicit_job_ref("<https://reports.example.com/r/1|r>", s) == "https://reports.example.com/r/1"
    for bad in ("/etc", "../x", "a/b", "<https://evil.io/x>", "https://evil.io/x", ".."):
        assert explicit_job_ref(bad, s) is None, bad
