"""What the repository promises about itself: the contract it points to is in it, CI prints how
many tests passed, and the package metadata uses the license form setuptools keeps supporting."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_contracts_md_is_in_the_repo_with_every_section() -> None:
    text = (ROOT / "CONTRACTS.md").read_text(encoding="utf-8")
    heads = re.findall(r"^## (\d)\. ", text, flags=re.M)
    assert heads == ["1", "2", "3", "4", "5"]
    assert "`diagnosis_id`" in text and "engine/data/diagnosis.v1.schema.json" in text
    assert (ROOT / "engine" / "data" / "diagnosis.v1.schema.json").is_file()


def test_every_contracts_reference_points_to_a_file_that_exists() -> None:
    sources = [ROOT / "README.md", *ROOT.glob("engine/**/*.py"), *ROOT.glob("bot/**/*.py"),
               *ROOT.glob("kb/**/*.py")]
    referring = [p for p in sources if "CONTRACTS" in p.read_text(encoding="utf-8")]
    assert referring and (ROOT / "CONTRACTS.md").is_file()


def test_ci_prints_the_number_of_tests_that_passed(tmp_path: Path) -> None:
    script = (ROOT / ".ci" / "run").read_text()
    (line,) = [ln for ln in script.splitlines() if "-m pytest" in ln]
    args = shlex.split(line.split("-m pytest", 1)[1], comments=True)
    r = subprocess.run([sys.executable, "-m", "pytest", *args, "tests/bot/test_manifest.py"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^1 passed in ", r.stdout, flags=re.M), r.stdout


def test_the_license_is_an_spdx_string_with_a_setuptools_that_reads_it() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "Apache-2.0"  # a table is deprecated (setuptools, 2027-02)
    (req,) = [r for r in meta["build-system"]["requires"] if r.startswith("setuptools")]
    assert int(re.search(r">=(\d+)", req).group(1)) >= 77  # PEP 639 license expressions


def test_the_readme_shows_diagnoses_list_and_the_where_line() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    using = readme[readme.index("## Using it"):readme.index("\n## ", readme.index("## Using it") + 1)]
    assert "l4 diagnoses list" in using
    assert re.search(r"^\s*Where: node \S+ · rank \S+ · stage \S+ · iteration \S+$", using, flags=re.M)
