"""Every built-in pattern names its source and carries one real line its signature matches; no
pattern fires on healthy output from public runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from kb import library
from kb.matcher import Matcher

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PATTERNS = {p["id"]: p for p in library.builtin_patterns()}
META = library.library_meta()
# Patterns for which no public real log line was found (catalogue-only); kept explicit so the set
# cannot grow silently.
NO_PUBLIC_EXAMPLE = {"ascend-cann-driver-mismatch", "nic-firmware-health-error",
                     "xid-61-microcontroller-breakpoint", "xid-137-nvlink-fla-privilege"}


def _lines(name: str) -> list[str]:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip() and not line.startswith("# ")]


@pytest.mark.parametrize("pid", sorted(PATTERNS))
def test_pattern_has_reference_and_matching_example(pid: str) -> None:
    meta = META[pid]
    assert meta["reference"], f"{pid}: no reference"
    if pid in NO_PUBLIC_EXAMPLE:
        assert not meta["example"]
        return
    assert meta["example"], f"{pid}: no example line"
    found = [m.pattern_id for m in Matcher([PATTERNS[pid]]).match_lines([meta["example"]])]
    assert found == [pid], f"{pid} does not match its own example {meta['example']!r}"


def test_no_public_example_list_is_exact() -> None:
    assert {pid for pid, m in META.items() if not m["example"]} == NO_PUBLIC_EXAMPLE


def test_explains_names_existing_patterns() -> None:
    for pid, meta in META.items():
        for entry in meta["explains"]:
            if entry.endswith("*"):
                assert any(other.startswith(entry[:-1]) for other in PATTERNS), (pid, entry)
            else:
                assert entry in PATTERNS, (pid, entry)
            assert entry != pid


@pytest.mark.parametrize("fixture", ["normal_field_lines.txt", "normal_sample_lines.txt"])
def test_library_matches_no_healthy_line(fixture: str) -> None:
    matcher = Matcher(library.builtin_patterns())
    hits = {line[:100]: [m.pattern_id for m in matcher.match_lines([line])] for line in _lines(fixture)}
    assert {k: v for k, v in hits.items() if v} == {}


def test_library_only_fields_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kb import KbError

    bad = {"id": "x-pattern", "title": "t", "category": "framework", "signature": ["abcdefgh"],
           "explains": "not-a-list"}
    with pytest.raises(KbError, match="explains must be a list"):
        library._library_fields("library/t.yaml: x-pattern", bad)
    with pytest.raises(KbError, match="example must be a non-empty string"):
        library._library_fields("library/t.yaml: x-pattern", {"example": ""})


def test_cli_list_shows_source_and_show_gives_example_and_test(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    import yaml

    from bot.cli_kb import register
    from kb import db as kbdb

    monkeypatch.setenv(kbdb.ENV_VAR, f"sqlite:///{tmp_path / 'cli.db'}")

    def run(*argv: str) -> str:
        parser = argparse.ArgumentParser(prog="l4")
        register(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(list(argv))
        assert args.func(args) == 0
        return capsys.readouterr().out

    listing = run("patterns", "list", "--category", "hardware/storage")
    row = next(line for line in listing.splitlines() if line.startswith("lustre-rpc-timeout "))
    assert "[source: " in row and "whamcloud" in row
    shown = yaml.safe_load(run("patterns", "show", "hccp-ej0002-environment-error"))
    assert shown["category"] == "hardware/network" and "The network port is down" in shown["example"]
    assert shown["example_matches"] is True
    assert shown["test"].endswith("[hccp-ej0002-environment-error]")
