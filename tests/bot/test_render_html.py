"""The HTML report is one self-contained file: every section, plots as data: URIs, no external
assets, log text escaped."""
from __future__ import annotations

import base64
from html.parser import HTMLParser

import pytest

from bot.render_html import render_html
from engine.diagnose import diagnose
from engine.model import Match
from tests.helpers import png
from tests.helpers.jobs import make_job

EVIL = "RuntimeError: boom <script>alert('x')</script> & <img src=http://evil.example/x.png>"


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []  # (tag, name, value)
        self.ids: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:  # noqa: ANN001
        self.tags.append(tag)
        for k, v in attrs:
            self.attrs.append((tag, k, v or ""))
            if k == "id":
                self.ids.append(v or "")

    def handle_data(self, data) -> None:  # noqa: ANN001
        self.text.append(data)


@pytest.fixture(scope="module")
def diagnosis(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    job = make_job(root / "job-html", nodes=4, fault_node=2, iterations=30, fault_at=25, fault_lines=(EVIL,))
    ok = make_job(root / "ok", nodes=4, fault_node=None, status="succeeded")
    d = diagnose(job, [ok])
    d.matches = [Match(pattern_id="boom", title="Boom <b>bold</b>", category="user/program-bug",
                       remediation="Fix & rerun", evidence=[EVIL])]
    d.report = {"url": "https://reports.example.com/r/1", "description": "<i>it died</i>"}
    return d


def test_sections_plots_and_no_external_assets(diagnosis) -> None:
    html = render_html(diagnosis)
    page = _Page()
    page.feed(html)
    assert {"summary", "report", "matches", "plots", "events", "nodes", "iterations"} <= set(page.ids)
    imgs = [v for tag, k, v in page.attrs if tag == "img" and k == "src"]
    assert len(imgs) == 3
    for src in imgs:
        assert src.startswith("data:image/png;base64,")
        assert png.size(base64.b64decode(src.split(",", 1)[1]))[0] > 100
    # no external assets: nothing fetched from the network, no scripts or stylesheets to load
    for tag, k, v in page.attrs:
        if k in ("src", "href", "srcset", "data", "action"):
            assert not v.lower().startswith(("http:", "https:", "//")), (tag, k, v)
            assert k != "href" or v.startswith("#")
    assert "script" not in page.tags and "link" not in page.tags and "@import" not in html
    assert "url(" not in html.split("<body>")[0]


def test_log_text_is_escaped(diagnosis) -> None:
    html = render_html(diagnosis)
    assert "<script>" not in html and "<img src=http" not in html and "<i>it died</i>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "Boom &lt;b&gt;bold&lt;/b&gt;" in html and "Fix &amp; rerun" in html
    page = _Page()
    page.feed(html)
    assert any(EVIL in t for t in page.text)  # the raw line reads back exactly


def test_without_plots_and_old_signature(diagnosis) -> None:
    html = render_html(diagnosis, plots=False)
    assert "data:image/png" not in html and "id='plots'" not in html and "id='events'" in html
    assert render_html(diagnosis).count("<figure>") == 3
