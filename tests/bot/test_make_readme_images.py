"""The README's example digest is reproducible from the demo seed."""
from __future__ import annotations

import json

from bot.make_readme_images import make_digest
from tests.helpers import png


def test_demo_digest_files(tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    make_digest(out, tmp_path)
    text = (out / "digest.txt").read_text(encoding="utf-8")
    assert text.startswith("L4 digest: the last 7 days\n2026-06-08 09:00 → 2026-06-15 09:00 UTC")
    assert "xid-79-fallen-off-bus, critical): 4 jobs (↑ from 1)" in text and "gpu-c044: drain" in text
    assert "16 jobs diagnosed (12 in the 7 days before) · 18 diagnoses" in text  # two jobs re-asked
    blocks = json.loads((out / "digest-blocks.json").read_text(encoding="utf-8"))["blocks"]
    assert blocks[0]["type"] == "header" and len(blocks) <= 50
    assert png.size((out / "digest-patterns.png").read_bytes()) == (960, 540)
