"""HTTPS through the pinned transport, against real TLS servers on 127.0.0.1 with certificates from a
throwaway CA: the CA bundle setting, certificate and hostname verification on the URL's hostname
while the socket goes to the vetted address, one-line refusals, and no https→http downgrade."""
import gzip
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.cli import main
from bot.config import ConfigError, Settings
from bot.resolve import resolve
from bot.sources.fetch import Budget, Fetcher
from bot.sources.netguard import Refused
from engine.ingest import JobError
from tests.helpers import tls_certs
from tests.helpers.http_server import HttpServer
from tests.helpers.jobs import make_job
from tests.helpers.wait import WAIT

HOST = "reports.l4-test.internal"  # exists only in L4's resolver, through fake_dns
ALIAS = "alias.l4-test.internal"  # allowlisted, same address, but not in the server's certificate
OTHER = "other.l4-test.internal"
SECRET = "s3cret-session"


@dataclass(frozen=True)
class Certs:
    ca: Path  # the throwaway CA's certificate: what L4_FETCH_CA_BUNDLE names
    server: tuple[Path, Path]  # for HOST (and IP 127.0.0.1)
    other: tuple[Path, Path]  # for OTHER only


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    if tls_certs.OPENSSL is None:
        pytest.skip("the openssl command is needed to make test certificates")
    base = tmp_path_factory.mktemp("tls")
    ca = tls_certs.make_ca(base / "ca")
    return Certs(ca.cert, tls_certs.issue(ca, base / "server", dns=[HOST], ips=["127.0.0.1"]),
                 tls_certs.issue(ca, base / "other", dns=[OTHER]))


@pytest.fixture
def names(fake_dns: dict[str, list[str]]) -> dict[str, list[str]]:
    for name in (HOST, ALIAS, OTHER):
        fake_dns[name] = ["127.0.0.1"]
    return fake_dns


def tls_settings(make_settings, certs: Certs | None, **overrides) -> Settings:
    values = dict(report_hosts=[HOST, ALIAS, OTHER], report_networks=["127.0.0.1/32"],
                  fetch_ca_bundle=str(certs.ca) if certs else None)
    return make_settings(**{**values, **overrides})


def get(settings: Settings, url: str) -> bytes | None:
    with Fetcher(settings, Budget.from_settings(settings)) as f:
        return f.get_bytes(url, 10_000)[0]


def publish(www: Path, job_id: str) -> None:
    """The job's logs as .gz files, as a log service serves them."""
    job = make_job(www / "logs" / job_id, nodes=2, ranks_per_node=2, fault_node=1)
    for f in list(job.rglob("*.log")):
        f.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes()))
        f.unlink()


def test_report_link_over_https_resolves_with_the_ca_bundle(tmp_path: Path, make_settings, names,
                                                            certs: Certs) -> None:
    """(a) report, redirect and .gz logs over HTTPS; the socket goes to the vetted 127.0.0.1 (the name
    is unknown to real DNS) while SNI, the certificate check and the Host header use the URL's name."""
    publish(tmp_path / "www", "job-0042")
    report = {"job_id": "job-0042", "description": "ECC error on node-001", "log_url": "/logs/job-0042/"}
    with HttpServer(tmp_path / "www", certfile=certs.server[0], keyfile=certs.server[1]) as srv:
        srv.route("/go", status=302, headers={"Location": "/reports/42"})  # https → https is followed
        srv.route("/reports/42", body=json.dumps(report).encode(), content_type="application/json")
        settings = tls_settings(make_settings, certs)
        got = resolve(srv.url(f"/go?session={SECRET}", host=HOST), settings=settings)
    assert got.job_id == "job-0042"
    assert sorted(p.name for p in got.path.rglob("*.log.gz")) == [f"rank-000{i}.log.gz" for i in range(4)]
    assert got.report["log_location"] == f"https://{HOST}:{srv.port}/logs/job-0042/"
    assert {r.headers["host"] for r in srv.seen()} == {f"{HOST}:{srv.port}"}
    assert srv.sni_names and set(srv.sni_names) == {HOST} and not srv.tls_errors
    assert SECRET not in json.dumps(got.report)


def test_an_https_report_pointing_to_plain_http_logs_is_refused(tmp_path: Path, make_settings, names,
                                                                certs: Certs) -> None:
    """The report came over TLS: its logs must not be fetched in clear text (a downgrade)."""
    report = {"job_id": "job-0042", "log_url": f"http://{HOST}:9/logs/job-0042/"}
    with HttpServer(certfile=certs.server[0], keyfile=certs.server[1]) as srv:
        srv.route("/reports/42", body=json.dumps(report).encode(), content_type="application/json")
        with pytest.raises(Refused, match="points to logs over plain http"):
            resolve(srv.url("/reports/42", host=HOST), settings=tls_settings(make_settings, certs))


def test_without_the_bundle_the_certificate_is_refused_in_one_line(tmp_path: Path, make_settings, names,
                                                                   certs: Certs) -> None:
    """(b) an internal CA that is not configured: a one-line error naming the certificate problem."""
    with HttpServer(certfile=certs.server[0], keyfile=certs.server[1]) as srv:
        srv.route("/reports/42", body=b'{"job_id": "job-1"}', content_type="application/json")
        url = srv.url(f"/reports/42?session={SECRET}", host=HOST)
        with pytest.raises(JobError) as info:
            resolve(url, settings=tls_settings(make_settings, None))
        assert not srv.seen()  # the handshake was abandoned: no request was sent
        deadline = time.monotonic() + 2
        while not srv.tls_errors and time.monotonic() < deadline:  # the server notices a moment later
            time.sleep(0.01)
        assert srv.tls_errors and "UNKNOWN_CA" in srv.tls_errors[0]  # the client said: unknown CA
    assert str(info.value) == (
        f"cannot fetch https://{HOST}:{srv.port}/reports/42?…: the server's TLS certificate was not "
        "accepted: unable to get local issuer certificate (an internal CA? add it with L4_FETCH_CA_BUNDLE)")


def test_l4_diagnose_shows_the_certificate_refusal_without_a_traceback(tmp_path: Path, certs: Certs) -> None:
    """(b) through the CLI, in a real process: one line on stderr, no trace, no token, no session."""
    with HttpServer(certfile=certs.server[0], keyfile=certs.server[1]) as srv:
        env = {**os.environ, "L4_DATABASE_URL": "sqlite://", "L4_REPORT_HOSTS": "127.0.0.1",
               "L4_CACHE_DIR": str(tmp_path / "cache"), "SLACK_BOT_TOKEN": "xoxb-do-not-print"}
        env.pop("L4_FETCH_CA_BUNDLE", None)
        cmd = [sys.executable, "-m", "bot.cli", "diagnose", srv.url(f"/r/1?session={SECRET}")]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=WAIT)
    assert done.returncode != 0 and not done.stdout
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "TLS certificate was not accepted: unable to get local issuer certificate" in done.stderr
    assert SECRET not in done.stderr and "xoxb" not in done.stderr


def test_l4_diagnose_with_a_missing_bundle_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("L4_FETCH_CA_BUNDLE", str(tmp_path / "missing.pem"))
    assert main(["diagnose", "job-1"]) != 0
    out, err = capsys.readouterr()
    assert not out and err == f"l4: L4_FETCH_CA_BUNDLE: no such file: {tmp_path / 'missing.pem'}\n"


def test_hostname_is_verified_on_the_pinned_connection(make_settings, names, certs: Certs) -> None:
    """(c) the certificate must name the URL's host: a certificate for another name is refused, and so
    is the right server reached through another allowlisted name (its certificate also covers
    127.0.0.1, so a check against the pinned address would have passed)."""
    settings = tls_settings(make_settings, certs)
    with HttpServer(certfile=certs.other[0], keyfile=certs.other[1]) as other:
        other.route("/r", body=b"hello")
        assert get(settings, other.url("/r", host=OTHER)) == b"hello"  # control: the right name passes
        with pytest.raises(JobError, match=rf"certificate was not accepted: Hostname mismatch, "
                                           rf"certificate is not valid for '{HOST}'$"):
            get(settings, other.url("/r", host=HOST))
    with HttpServer(certfile=certs.server[0], keyfile=certs.server[1]) as srv:
        srv.route("/r", body=b"hello")
        with pytest.raises(JobError, match=rf"Hostname mismatch, certificate is not valid for '{ALIAS}'$"):
            get(settings, srv.url("/r", host=ALIAS))
        assert srv.sni_names == [ALIAS] and not srv.seen()  # SNI is the URL's name, not the address


def test_redirect_from_https_to_http_is_refused(make_settings, names, certs: Certs) -> None:
    """(d) a downgrade would send the request, and the logs, in clear text: refused before any
    connection to the http address; the other direction (http → https) is followed."""
    settings = tls_settings(make_settings, certs)
    with HttpServer() as plain, HttpServer(certfile=certs.server[0], keyfile=certs.server[1]) as tls:
        plain.route("/r", body=b"clear text")
        plain.route("/up", status=302, headers={"Location": tls.url("/r", host=HOST)})
        tls.route("/r", body=b"over tls")
        tls.route("/down", status=301, headers={"Location": plain.url(f"/r?session={SECRET}", host=HOST)})
        with pytest.raises(Refused) as info:
            get(settings, tls.url("/down", host=HOST))
        assert get(settings, plain.url("/up", host=HOST)) == b"over tls"
        assert [r.path for r in plain.seen()] == ["/up"]
    assert str(info.value) == (f"refused: https://{HOST}:{tls.port}/down redirects from https to http "
                               f"(http://{HOST}:{plain.port}/r?…); a downgrade is not followed")


def test_https_link_to_a_plain_http_server_is_one_line(make_settings, names, certs: Certs) -> None:
    with HttpServer() as plain:
        with pytest.raises(JobError) as info:
            get(tls_settings(make_settings, certs), plain.url("/r", host=HOST).replace("http:", "https:"))
    assert str(info.value) == (f"cannot fetch https://{HOST}:{plain.port}/r: TLS handshake failed "
                               "(wrong version number; is it an http:// server?)")


def test_ca_bundle_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make_settings,
                           certs: Certs) -> None:
    monkeypatch.setenv("L4_FETCH_CA_BUNDLE", str(certs.ca))
    assert Settings.from_env().fetch_ca_bundle == str(certs.ca)
    monkeypatch.delenv("L4_FETCH_CA_BUNDLE")
    assert Settings.from_env().fetch_ca_bundle is None
    (tmp_path / "notes.txt").write_text("not a certificate\n")
    (tmp_path / "broken.pem").write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
    for value, message in [(tmp_path / "nope.pem", "no such file:"), (tmp_path, "no such file:"),
                           (tmp_path / "notes.txt", "no PEM certificates in")]:
        monkeypatch.setenv("L4_FETCH_CA_BUNDLE", str(value))
        with pytest.raises(ConfigError, match=f"^L4_FETCH_CA_BUNDLE: {message} {value}$"):
            Settings.from_env()
    # Settings made in code skip from_env's checks: the TLS context says the same, in one line
    for value, message in [(tmp_path / "broken.pem", "no PEM certificates in"),
                           (tmp_path / "gone.pem", "cannot read")]:
        settings = make_settings(fetch_ca_bundle=str(value))
        with pytest.raises(ConfigError, match=f"^L4_FETCH_CA_BUNDLE: {message} {value}"):
            Fetcher(settings, Budget.from_settings(settings))
