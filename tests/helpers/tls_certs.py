"""Throwaway certificate authorities and server certificates for TLS tests, made with the `openssl`
command (EC P-256 keys: fast; extensions as strict verifiers want them).

    ca = make_ca(tmp / "ca")                                   # ca.cert: the PEM to trust
    cert, key = issue(ca, tmp / "srv", dns=["reports.l4-test.internal"], ips=["127.0.0.1"])
"""
from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

OPENSSL = shutil.which("openssl")
_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


@dataclass(frozen=True)
class Ca:
    cert: Path  # PEM certificate (what a client trusts)
    key: Path


def _run(*args: str, cwd: Path) -> None:
    if OPENSSL is None:
        raise RuntimeError("the openssl command is not installed")
    done = subprocess.run([OPENSSL, *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.strip()[:500]}")


def make_ca(folder: Path, name: str = "L4 test CA") -> Ca:
    """A self-signed CA certificate and key in `folder`, valid for two days."""
    folder.mkdir(parents=True, exist_ok=True)
    _run("req", "-x509", *_KEY, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", f"/CN={name}",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
         "-addext", "subjectKeyIdentifier=hash", cwd=folder)
    return Ca(folder / "ca.pem", folder / "ca.key")


def issue(ca: Ca, folder: Path, dns: list[str], ips: list[str] | None = None) -> tuple[Path, Path]:
    """A server certificate signed by `ca` for the names `dns` (and addresses `ips`) as SANs:
    (certificate PEM, key PEM) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    sans = ",".join([f"DNS:{d}" for d in dns] + [f"IP:{i}" for i in ips or []])
    (folder / "ext.cnf").write_text(
        f"subjectAltName={sans}\nbasicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")
    _run("req", "-new", *_KEY, "-keyout", "server.key", "-out", "server.csr", "-subj", f"/CN={dns[0]}",
         cwd=folder)
    _run("x509", "-req", "-in", "server.csr", "-CA", str(ca.cert), "-CAkey", str(ca.key),
         "-set_serial", str(secrets.randbits(63)), "-days", "2", "-extfile", "ext.cnf", "-out", "server.pem",
         cwd=folder)
    return folder / "server.pem", folder / "server.key"
