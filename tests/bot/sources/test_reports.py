"""Report documents (JSON fields, HTML with a job ID) and URL rules, from the rules file."""
from pathlib import Path

import pytest

from bot.config import ConfigError
from bot.sources.fetch import Budget
from bot.sources.reports import fetch_report, load_rules, match_url, parse_document
from engine.ingest import JobError
from tests.helpers.http_server import HttpServer

PATTERN = r"job-[A-Za-z0-9][A-Za-z0-9._-]*"


def test_json_report_fields_by_the_bundled_rules() -> None:
    body = (b'{"job": {"id": "job-0042", "settings": {"model": "llama-70b"}}, "failure": {"description": '
            b'"NCCL timeout\\u0000 at step 1873"}, "logs": {"url": "/logs/job-0042/"}, "owner": "ana", '
            b'"exit_code": 1, "failed_at": {"deep": "x"}}')
    r = parse_document(body, "application/json", load_rules(), PATTERN)
    assert r.job_id == "job-0042" and r.settings == {"model": "llama-70b"}
    assert r.description == "NCCL timeout  at step 1873"  # control characters removed
    assert r.log_location == "/logs/job-0042/"
    assert r.extra == {"owner": "ana", "exit_code": 1, "failed_at": {"deep": "x"}}


def test_html_report_with_a_job_id() -> None:
    page = b"""<html><head><title>Failure of run 7</title>
      <meta name="description" content="Loss went NaN after a node reboot"></head>
      <body><script>var x = "job-fake";</script><p>Job <b>job-0777.</b> failed.</p>
      <a data-log-location href="https://logs.example.com/job-0777/">logs</a>
      <div data-job-settings='{"model": "toy"}'></div></body></html>"""
    r = parse_document(page, "text/html", load_rules(), PATTERN)
    assert r.job_id == "job-0777"  # from the visible text, not the script
    assert r.description == "Loss went NaN after a node reboot"
    assert r.log_location == "https://logs.example.com/job-0777/" and r.settings == {"model": "toy"}
    marked = parse_document(b'<div data-job-id="run-12">x</div><title>T</title>', "text/html", load_rules(),
                            PATTERN)
    assert marked.job_id == "run-12" and marked.description == "T"


def test_custom_rules_file(tmp_path: Path, make_settings) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(r"""
url_rules:
  - pattern: 'http://127\.0\.0\.1:\d+/jobs/(?P<job_id>job-[\w.-]+)/failure'
    fetch: false
  - pattern: 'http://127\.0\.0\.1:\d+/runs/(?P<run>\d+)'
    logs: 'http://127.0.0.1:9/runs/{run}/'
json:
  job_id: [meta.job]
  description: [why]
""")
    loaded = load_rules(str(rules))
    assert match_url("http://127.0.0.1:80/jobs/job-1/failure?token=x", loaded)[1] == {"job_id": "job-1"}
    assert match_url("http://127.0.0.1:80/other", loaded) is None
    s = make_settings(report_rules=str(rules))
    with HttpServer() as srv:
        srv.route("/runs/55", body=b'{"meta": {"job": "job-55"}, "why": "OOM"}',
                  content_type="application/json")
        r = fetch_report(srv.url("/jobs/job-9/failure"), s, Budget.from_settings(s))
        assert r.job_id == "job-9" and not srv.seen()  # the rule alone: nothing fetched
        r = fetch_report(srv.url("/runs/55"), s, Budget.from_settings(s))
        assert (r.job_id, r.description, r.log_location) == ("job-55", "OOM", "http://127.0.0.1:9/runs/55/")
        srv.route("/runs/56", body=b"<html><p>nothing here</p></html>", content_type="text/html")
        with pytest.raises(JobError, match=r"no job ID found in the failure report http://127.0.0.1:\d+/runs/56"):
            fetch_report(srv.url("/runs/56"), s, Budget.from_settings(s))


@pytest.mark.parametrize("text, message", [
    ("url_rules: [{pattern: '('}]", "url_rules\\[0\\].pattern"),
    ("url_rules: [{pattern: 'x'}]", "needs a \\(\\?P<job_id>"),
    ("json: [1]", "'json' must be a mapping"),
    ("a: [", "not valid YAML"),
])
def test_bad_rules_files_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / f"r{abs(hash(text))}.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_rules(str(path))
