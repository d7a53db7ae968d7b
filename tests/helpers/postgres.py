"""A throwaway PostgreSQL cluster on a free 127.0.0.1 port, when PostgreSQL server binaries exist
on the machine (initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin); the fixtures skip with the
reason otherwise. ``L4_TEST_POSTGRES_URL`` points at an existing server instead. The fixtures are
registered for every test folder by tests/conftest.py:

    def test_x(postgres_url): ...      # a fresh, empty database for the test
"""
from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.wait import WAIT


def _find_pg_bin() -> Path | None:
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(d, "initdb").exists() and Path(d, "pg_ctl").exists():
            return Path(d)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _PgCluster:
    def __init__(self, bindir: Path, run_as: str | None) -> None:
        self.bindir, self.run_as = bindir, run_as
        self.dir = Path(tempfile.mkdtemp(prefix="l4-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        if run_as:
            pw = pwd.getpwnam(run_as)
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o700)

    def _run(self, *cmd: str) -> subprocess.CompletedProcess:
        full = list(cmd)
        if self.run_as:
            full = ["runuser", "-u", self.run_as, "--", *full]
        return subprocess.run(full, capture_output=True, text=True, timeout=WAIT, cwd=self.dir)

    def start(self) -> None:
        r = self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "l4",
                      "-E", "UTF8", "--no-sync")
        if r.returncode:
            raise RuntimeError(f"initdb failed: {r.stderr.strip()[-300:]}")
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        r = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.dir / "log"),
                      "-o", opts, "-w", "-t", "60", "start")
        if r.returncode:
            raise RuntimeError(f"pg_ctl start failed: {r.stderr.strip()[-300:]}")

    def stop(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://l4@127.0.0.1:{self.port}/{database}"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """URL of an administrative database on a PostgreSQL server; skips with the reason when
    none can be had. ``L4_TEST_POSTGRES_URL`` points at an existing server instead."""
    external = os.environ.get("L4_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("PostgreSQL test skipped: the psycopg driver is not installed")
    bindir = _find_pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL test skipped: no initdb/pg_ctl binaries on PATH or in "
                    "/usr/lib/postgresql/*/bin")
    run_as = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("PostgreSQL test skipped: running as root and there is no 'postgres' user "
                        "to run the server")
        if not shutil.which("runuser"):
            pytest.skip("PostgreSQL test skipped: running as root and 'runuser' is missing")
        run_as = "postgres"
    cluster = _PgCluster(bindir, run_as)
    try:
        cluster.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        cluster.stop()
        pytest.skip(f"PostgreSQL test skipped: could not start a throwaway server: {exc}")
    try:
        yield cluster.url()
    finally:
        cluster.stop()


_db_counter = itertools.count()


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"l4_test_{os.getpid()}_{next(_db_counter)}"
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(postgres_server).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as c:
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
