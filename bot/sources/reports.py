"""Failure-report links: URL rules (link → job ID) and report documents (JSON, or HTML with a job
ID) read for the job ID, description, settings and log location.

The rules are data: `bot/sources/data/report_rules.yaml`, or the file `L4_REPORT_RULES` names.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from urllib.parse import quote, urljoin

import yaml

from bot.config import ConfigError, Settings
from bot.sources.fetch import Budget, Fetcher
from bot.sources.netguard import safe_url
from engine.ingest import JobError

MAX_LINK = 2048
MAX_DESCRIPTION = 2000
MAX_VALUE = 500
MAX_JSON = 20_000
FIELDS = ("job_id", "description", "settings", "log_location")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass
class UrlRule:
    pattern: re.Pattern[str]
    fetch: bool = True
    logs: str | None = None


@dataclass
class ReportRules:
    url_rules: list[UrlRule] = field(default_factory=list)
    json_fields: dict[str, list[str]] = field(default_factory=dict)
    json_extra: dict[str, str] = field(default_factory=dict)
    html_fields: dict[str, list[str]] = field(default_factory=dict)
    html_extra: dict[str, str] = field(default_factory=dict)
    max_bytes: int = 2_000_000


@dataclass
class Report:
    """What a failure report said about its job."""

    url: str  # the link, safe to show (no query string)
    job_id: str | None = None
    description: str | None = None
    settings: dict | None = None
    log_location: str | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        out: dict = {"url": self.url}
        if self.job_id:
            out["job_id"] = self.job_id
        if self.description:
            out["description"] = self.description
        if self.settings:
            out["settings"] = self.settings
        if self.log_location:
            out["log_location"] = safe_url(self.log_location)
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


def load_rules(path: str | None = None) -> ReportRules:
    """The rules in `path` (L4_REPORT_RULES), or the bundled default. ConfigError when malformed."""
    return _load_rules(str(Path(path).resolve()) if path else None)


@lru_cache(maxsize=8)
def _load_rules(path: str | None) -> ReportRules:
    where = f"L4_REPORT_RULES ({path})" if path else "bundled report_rules.yaml"
    try:
        if path:
            text = Path(path).read_text(encoding="utf-8")
        else:
            text = resources.files("bot.sources").joinpath("data").joinpath("report_rules.yaml").read_text(
                encoding="utf-8")
        data = yaml.safe_load(text) or {}
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read ({exc.__class__.__name__})") from None
    except yaml.YAMLError:
        raise ConfigError(f"{where}: not valid YAML") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: must be a mapping")
    rules = ReportRules(max_bytes=int(data.get("max_bytes") or 2_000_000))
    for k, raw in enumerate(data.get("url_rules") or []):
        if not isinstance(raw, dict) or not isinstance(raw.get("pattern"), str):
            raise ConfigError(f"{where}: url_rules[{k}] needs a 'pattern'")
        try:
            pattern = re.compile(raw["pattern"])
        except re.error as exc:
            raise ConfigError(f"{where}: url_rules[{k}].pattern: {exc}") from None
        if "job_id" not in pattern.groupindex and not raw.get("logs"):
            raise ConfigError(f"{where}: url_rules[{k}] needs a (?P<job_id>...) group or 'logs'")
        rules.url_rules.append(UrlRule(pattern, bool(raw.get("fetch", True)), raw.get("logs") or None))
    for section, fields_attr, extra_attr in (("json", "json_fields", "json_extra"),
                                              ("html", "html_fields", "html_extra")):
        block = data.get(section) or {}
        if not isinstance(block, dict):
            raise ConfigError(f"{where}: '{section}' must be a mapping")
        fields_map: dict[str, list[str]] = {}
        for name in FIELDS:
            value = block.get(name) or []
            fields_map[name] = [value] if isinstance(value, str) else [str(v) for v in value]
        setattr(rules, fields_attr, fields_map)
        extra = block.get("extra") or {}
        if not isinstance(extra, dict):
            raise ConfigError(f"{where}: '{section}.extra' must be a mapping")
        setattr(rules, extra_attr, {str(k): str(v) for k, v in extra.items()})
    return rules


def match_url(url: str, rules: ReportRules) -> tuple[UrlRule, dict[str, str]] | None:
    """The first URL rule matching `url` (without its query string) and its named groups."""
    bare = url.split("#", 1)[0].split("?", 1)[0]
    for rule in rules.url_rules:
        m = rule.pattern.fullmatch(bare)
        if m:
            return rule, {k: v for k, v in m.groupdict().items() if v is not None}
    return None


def fetch_report(url: str, settings: Settings, budget: Budget) -> Report:
    """What the failure report at `url` says about its job (JobError/Refused when it cannot)."""
    url = url.strip()
    if len(url) > MAX_LINK:
        raise JobError(f"refused: the link is longer than {MAX_LINK} characters")
    rules = load_rules(settings.report_rules)
    report = Report(url=safe_url(url))
    with Fetcher(settings, budget) as fetcher:
        fetcher.check_url(url)  # host allowlist before anything else, even a rule-only link
        hit = match_url(url, rules)
        if hit is not None:
            rule, groups = hit
            report.job_id = groups.get("job_id")
            if rule.logs:
                values = {k: quote(v, safe="") for k, v in groups.items()}
                try:
                    report.log_location = rule.logs.format_map(values)
                except (KeyError, IndexError, ValueError):
                    raise ConfigError(f"report rule {rule.pattern.pattern[:60]!r}: 'logs' names a group "
                                      "the pattern does not have") from None
        if hit is None or hit[0].fetch:
            body, content_type = fetcher.get_bytes(url, rules.max_bytes, "application/json, text/html;q=0.9")
            if body is None:
                raise JobError(f"failure report not found: {safe_url(url)} answered HTTP 404")
            doc = parse_document(body, content_type, rules, settings.job_id_pattern)
            report.job_id = report.job_id or doc.job_id
            report.description, report.settings, report.extra = doc.description, doc.settings, doc.extra
            if not report.log_location and doc.log_location:
                try:
                    report.log_location = urljoin(url, doc.log_location)
                except ValueError:  # an invalid IPv6 literal, a bad port...
                    raise JobError("the report's log location is not a valid URL") from None
    if not report.job_id:
        raise JobError(f"no job ID found in the failure report {safe_url(url)}")
    return report


def parse_document(body: bytes, content_type: str, rules: ReportRules, job_id_pattern: str) -> Report:
    """The fields of a report document: JSON (by content type or a leading '{'), else HTML."""
    text = body.decode("utf-8", errors="replace")
    if "json" in content_type.lower() or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            raise JobError("the failure report is not valid JSON") from None
        if not isinstance(data, dict):
            raise JobError("the failure report is not a JSON object")
        raw = {name: _first(data, paths) for name, paths in rules.json_fields.items()}
        extra_raw = {name: _first(data, [path]) for name, path in rules.json_extra.items()}
    else:
        page = _Page(job_id_pattern)
        page.feed(text)
        page.close()
        raw = {name: page.lookup(sources, name) for name, sources in rules.html_fields.items()}
        extra_raw = {name: page.lookup([src], name) for name, src in rules.html_extra.items()}
        if isinstance(raw.get("settings"), str):
            try:
                raw["settings"] = json.loads(raw["settings"])
            except ValueError:
                raw["settings"] = None
    report = Report(url="")
    job_id = raw.get("job_id")
    report.job_id = str(job_id).strip() if isinstance(job_id, str | int) and str(job_id).strip() else None
    report.description = _text(raw.get("description"), MAX_DESCRIPTION)
    settings = raw.get("settings")
    report.settings = settings if isinstance(settings, dict) and _small_json(settings) else None
    location = raw.get("log_location")
    report.log_location = location.strip() if isinstance(location, str) and location.strip() else None
    for name, value in extra_raw.items():
        if isinstance(value, str):
            value = _text(value, MAX_VALUE)
        elif not isinstance(value, int | float | bool):
            value = value if isinstance(value, dict | list) and _small_json(value) else None
        if value is not None:
            report.extra[name] = value
    return report


def _first(data: dict, paths: list[str]):
    for path in paths:
        node = data
        for key in path.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if node not in (None, "", {}, []):
            return node
    return None


def _text(value, limit: int) -> str | None:
    if not isinstance(value, str):
        return None
    value = _CONTROL.sub(" ", value).strip()
    if not value:
        return None
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _small_json(value) -> bool:
    try:
        return len(json.dumps(value)) <= MAX_JSON
    except (TypeError, ValueError):
        return False


class _Page(HTMLParser):
    """What an HTML report offers: meta tags, marked attributes, the title, the visible text."""

    def __init__(self, job_id_pattern: str) -> None:
        super().__init__(convert_charrefs=True)
        self.job_id_pattern = job_id_pattern
        self.meta: dict[str, str] = {}
        self.attrs: dict[str, str] = {}
        self.title = ""
        self.text: list[str] = []
        self._in: list[str] = []
        self._size = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k.lower(): (v or "") for k, v in attrs}
        if tag == "meta":
            name = (values.get("name") or values.get("property") or "").lower()
            if name and name not in self.meta:
                self.meta[name] = values.get("content", "")
        for key, value in values.items():
            if key not in self.attrs:
                self.attrs[key] = value or values.get("href", "")
        if tag in ("script", "style", "title"):
            self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if self._in and self._in[-1] == "title":
            self.title += data
        elif not self._in and self._size < 1_000_000:
            self.text.append(data)
            self._size += len(data)

    def lookup(self, sources: list[str], name: str) -> str | None:
        for source in sources:
            kind, _, arg = source.partition(":")
            value: str | None = None
            if kind == "meta":
                value = self.meta.get(arg.lower())
            elif kind == "attr":
                value = self.attrs.get(arg.lower())
            elif kind == "title":
                value = self.title
            elif kind == "text" and name == "job_id":
                m = re.search(rf"(?<![\w.-])(?:{self.job_id_pattern})(?![\w-])", " ".join(self.text))
                value = m.group(0).rstrip(".") if m else None
            if value and value.strip():
                return value.strip()
        return None
