"""Fixtures shared by every test folder: a throwaway PostgreSQL server (skipped without binaries), and
the isolation that lets the suite run on several pytest-xdist workers at once (README "## CI").

Every test, without asking for it:
- starts from an environment without the developer's L4_* and SLACK_* variables (L4_TEST_* stay: they
  configure the tests themselves), so a shell's L4_DATABASE_URL or token never reaches a test;
- has no plain progress line of `l4 diagnose` on stderr (``L4_PROGRESS_SECONDS`` is an hour), so the
  lines a test counts do not depend on how loaded the machine is;
- has the defaults that would otherwise be shared files (the knowledge base in
  ``user_data_dir("l4")``, the job and bench cache in ``~/.cache/l4``) pointed at folders of its own,
  created only when the code under test writes there; the CLI and bot subprocesses a test starts
  with ``{**os.environ, ...}`` inherit them;
- gets back, afterwards, the environment and working folder it started with, whatever the code under
  test changed (``load_dotenv()`` writes os.environ; a command may chdir).

The files of a run are ordered longest first by tests/ci_durations.yaml (files it does not list run
after the listed ones, in pytest's order): with ``--dist loadfile --no-loadscope-reorder`` (.ci/run)
the two workers take the long files early and the short ones even out the end.
"""
from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.helpers.postgres import postgres_server, postgres_url  # noqa: F401 - pytest fixtures

_KEEP = ("L4_TEST_",)
_SCRUB = ("L4_", "SLACK_")
_defaults = itertools.count()
_DURATIONS = Path(__file__).with_name("ci_durations.yaml")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    seconds = yaml.safe_load(_DURATIONS.read_text()) if _DURATIONS.exists() else {}
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(item.nodeid.split("::", 1)[0], len(first_seen))

    def key(item: pytest.Item) -> tuple[float, int]:
        name = item.nodeid.split("::", 1)[0]
        return (-float(seconds.get(name, -1.0)), first_seen[name])

    items.sort(key=key)  # stable: a file's tests keep their order


@pytest.fixture(scope="session", autouse=True)
def _no_developer_settings() -> Iterator[None]:
    saved = dict(os.environ)
    for key in [k for k in os.environ if k.startswith(_SCRUB) and not k.startswith(_KEEP)]:
        del os.environ[key]
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(autouse=True)
def _isolated_defaults(_no_developer_settings: None, tmp_path_factory: pytest.TempPathFactory,
                       request: pytest.FixtureRequest) -> Iterator[None]:
    env, cwd = dict(os.environ), os.getcwd()
    name = re.sub(r"[^\w.-]", "_", request.node.name)[:40]
    own = tmp_path_factory.getbasetemp() / "defaults" / f"{next(_defaults)}-{name}"
    os.environ["XDG_DATA_HOME"] = str(own / "data")  # kb.db.database_url()'s default folder
    os.environ["L4_CACHE_DIR"] = str(own / "cache")  # instead of ~/.cache/l4
    os.environ["L4_PROGRESS_SECONDS"] = "3600"  # no `l4: 1/3 files read` line in stderr on a slow machine
    yield
    if os.getcwd() != cwd:
        os.chdir(cwd)
    if os.environ != env:
        os.environ.clear()
        os.environ.update(env)
