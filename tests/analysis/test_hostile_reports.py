"""Reports from a dataset of attacks: nothing the wire said runs in a browser, a Markdown viewer or a terminal."""

from __future__ import annotations

import json
import os
import re
import stat
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from converse_tap.analysis.render import CSP, json_island, safe_href, to_html, to_markdown
from converse_tap.cli import cli
from converse_tap.textsafe import is_terminal_safe
from tests.analysis.hostile import PAYLOADS, build_hostile
from tests.browser import dump_dom, ensure_chromium
from tests.cli_helpers import invoke


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile")
    build_hostile(out)
    return out


@pytest.fixture(scope="module")
def report(hostile: Path) -> dict[str, Any]:
    r = invoke("report", str(hostile), "--format", "json", "--by", "agent", "--by", "day")
    data: dict[str, Any] = json.loads(r.stdout)
    # the attack reached the report: otherwise the tests below would prove nothing
    found = strings(data)
    assert set(PAYLOADS) <= found, set(PAYLOADS) - found
    return data


def strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set(value).union(*(strings(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(strings(v) for v in value))
    return set()


class Tags(HTMLParser):
    """Every element, attribute and comment of an HTML document (script content kept per script)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.comments: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


def parse(html: str) -> Tags:
    t = Tags()
    t.feed(html)
    t.close()
    return t


def assert_inert(doc: Tags, allowed: set[str]) -> None:
    names = {tag for tag, _ in doc.tags}
    assert names <= allowed, names - allowed
    for tag, attrs in doc.tags:
        assert not [a for a in attrs if a.startswith("on")], (tag, attrs)
        for a in ("href", "src", "srcdoc", "xlink:href", "action", "formaction"):
            if a in attrs:
                assert a == "href" and tag == "a" and safe_href(attrs[a] or "") is not None, (tag, attrs)
    assert not doc.comments


# -- terminal ----------------------------------------------------------------------------------------------------


def test_text_outputs_show_controls_as_escapes(hostile: Path) -> None:
    outputs = {
        "report": invoke("report", str(hostile), "--by", "agent").stdout,
        "agents": invoke("agents", str(hostile)).stdout,
        "check": invoke("check", str(hostile), "--per-agent", "--max-abandonment-rate", "0.5").stdout,
    }
    for name, out in outputs.items():
        assert is_terminal_safe(out, multiline=True), name
        assert "\x1b" not in out and "\r" not in out and "\u202e" not in out, name
    # the escapes are visible, so the payload is seen for what it is
    assert "\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\rERASED\\x08\\u202egnp.exe\\u2066\\x00" in outputs["report"]
    # the card name, and the agent key (whose URL path has its control characters percent-encoded)
    assert all("\\x1b[2J\\x1b]0;owned" in out or "%1B[2J%1B]0;owned" in out for out in outputs.values())
    # and JSON stays exact: it is data, not display
    exact = invoke("report", str(hostile), "--format", "json").stdout
    assert PAYLOADS[-1] in json.loads(exact)["coverage"]["by_reason"]
    agents = json.loads(invoke("agents", str(hostile), "--format", "json").stdout)
    assert PAYLOADS[-1] in [c["name"] for a in agents for c in a["cards"]]


# -- Markdown ----------------------------------------------------------------------------------------------------


def test_markdown_renders_to_nothing_executable(report: dict[str, Any]) -> None:
    md = to_markdown(report)
    # the most permissive common setup: raw HTML allowed, bare URLs linked, GFM tables
    renderer = MarkdownIt("commonmark", {"html": True, "linkify": True}).enable(["table", "linkify"])
    html = renderer.render(md)
    doc = parse(html)
    # no link (not even a bare URL linkified) and no emphasis from the data: only the report's own bold titles
    allowed = {"h1", "h2", "p", "br", "strong", "table", "thead", "tbody", "tr", "th", "td"}
    assert_inert(doc, allowed)
    assert not re.search(r"(?i)javascript:", "".join(a.get("href") or "" for _, a in doc.tags))
    # every table row keeps its columns: no `|` or line break from the data splits a cell
    for table in re.findall(r"<table>.*?</table>", html, re.S):
        heads = len(re.findall(r"<th[ >]", table))
        rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]
        assert rows and all(len(re.findall(r"<td[ >]", r)) == heads for r in rows)
    # the payloads are shown, as text
    text = "".join(doc.text)
    assert "<img src=x onerror=" in text and "[click](javascript:" in text and "`code` | pipe new line" in text


# -- HTML --------------------------------------------------------------------------------------------------------

HTML_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "table", "caption", "thead", "tbody"}
HTML_TAGS |= {"tr", "th", "td", "figure", "figcaption", "svg", "g", "rect", "text", "title", "line", "script", "a"}


def test_html_report_escapes_every_value(report: dict[str, Any]) -> None:
    html = to_html(report)
    doc = parse(html)
    assert_inert(doc, HTML_TAGS)
    scripts = [(attrs.get("type"), attrs.get("id")) for tag, attrs in doc.tags if tag == "script"]
    assert scripts == [("application/json", "report-data"), (None, None)]
    island, _own = doc.scripts
    assert json.loads(island) == json.loads(json.dumps(report))  # the whole report, intact
    assert not re.search("[<>&\u2028\u2029]", island)
    csp = [a["content"] for t, a in doc.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp == [CSP] and "'unsafe-inline'" not in CSP and "script-src 'sha256-" in CSP
    assert [a["href"] for t, a in doc.tags if t == "a"] == []  # the only URLs in this data are javascript:


@given(st.text())
def test_json_island_cannot_be_broken_out_of(s: str) -> None:
    island = json_island({"v": s, s: [s]})
    assert not re.search("[<>&\u2028\u2029]", island)
    assert json.loads(island) == {"v": s, s: [s]}


def test_only_web_urls_become_links() -> None:
    assert safe_href("https://mcp.example/a?b=1") == "https://mcp.example/a?b=1"
    assert safe_href("HTTP://x.test/") == "HTTP://x.test/"
    for bad in (
        "javascript:alert(1)",
        "data:text/html,x",
        " https://x.test",
        "https://x.test/\nx",
        "//x.test",
        "java\tscript:x",
        "vbscript:x",
    ):
        assert safe_href(bad) is None, bad


def test_html_report_in_a_browser_runs_no_payload(hostile: Path, tmp_path: Path) -> None:
    """The report as `report --format html` writes it: its counts opening example conversations and their
    transcripts, every hostile string among them."""
    chromium = ensure_chromium()
    r = invoke("report", str(hostile), "--format", "html", "--by", "agent", "-o", str(tmp_path / "cli.html"))
    assert r.exit_code == 0, r.stderr
    page = (tmp_path / "cli.html").read_text()
    assert 'class="tr"' in page and 'class="ex"' in page, "transcripts and examples are in the page"
    no_csp = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
    assert no_csp != page
    # control: the same page with one payload left unescaped does run it, so the probe can see a payload run
    control = no_csp.replace("<h1>converse-tap report</h1>", "<h1>converse-tap report</h1>" + PAYLOADS[1])
    pages = {"report": page, "without CSP": no_csp, "control": control}
    doms = {}
    for name, text in pages.items():
        path = tmp_path / f"{name.replace(' ', '-')}.html"
        path.write_text(text, encoding="utf-8")
        doms[name] = dump_dom(chromium, path)
    assert 'data-pwned="2"' in doms["control"]
    for name in ("report", "without CSP"):
        dom = doms[name]
        root = re.search(r"<html[^>]*>", dom)
        assert root is not None
        assert 'data-report="parsed"' in root.group(0), (name, root.group(0))  # own script ran, island parsed
        assert "data-pwned" not in root.group(0), (name, root.group(0))
        assert re.search(r"<title>(.*?)</title>", dom).group(1) == "converse-tap report", name  # type: ignore[union-attr]


# -- files -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "html"])
def test_report_files_are_owner_only(hostile: Path, tmp_path: Path, fmt: str) -> None:
    fresh, existing = tmp_path / f"new.{fmt}", tmp_path / f"old.{fmt}"
    existing.write_text("old")
    existing.chmod(0o644)
    old_umask = os.umask(0o022)
    try:
        for path in (fresh, existing):
            r = invoke("report", str(hostile), "--format", fmt, "-o", str(path))
            assert r.exit_code == 0
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
            assert path.read_text() != "old"
    finally:
        os.umask(old_umask)


def test_report_file_that_cannot_be_written_is_a_clear_error(hostile: Path, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x")  # a missing directory is created; a parent that is a file cannot be
    r = CliRunner().invoke(cli, ["report", str(hostile), "-o", str(tmp_path / "a-file" / "r.txt")])
    assert r.exit_code == 2 and "a-file" in r.stderr and "Traceback" not in r.output
