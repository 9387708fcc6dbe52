"""The HTML report's drill-down and charts: counts open their example conversations, each linked to its embedded
transcript; charts print their values; a one-day series is a sentence. Rendered in headless Chromium."""

from __future__ import annotations

import json
import re
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from converse_tap.analysis.charts import columns, nice_top
from converse_tap.analysis.html_drill import anchor
from converse_tap.cli import cli
from tests.browser import CHROMIUM_FLAGS, ensure_chromium
from tests.golden.sample import build_sample


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html")
    build_sample(out / "data")
    r = CliRunner().invoke(cli, ["report", str(out / "data"), "--format", "html", "-o", str(out / "r.html")])
    assert r.exit_code == 0, r.output
    return out / "r.html"


@pytest.fixture(scope="module")
def chromium() -> str:
    return ensure_chromium()


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.example_cells = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "a" and (a.get("href") or "").startswith("#"):
            self.links.append(str(a["href"])[1:])
        if tag == "details" and a.get("class") == "ex":
            self.example_cells += 1


def test_counts_open_examples_linked_to_embedded_transcripts(page: Path) -> None:
    html = page.read_text()
    parsed = _Links()
    parsed.feed(html)
    # coverage answered/partial/unanswered, author agent/human, abandoned at date, invocation started
    assert parsed.example_cells == 7
    assert parsed.links and set(parsed.links) <= parsed.ids
    assert {anchor(c) for c in ("c1", "c2", "c3", "c4")} <= parsed.ids
    transcripts = html.split('<section id="transcripts">', 1)[1]
    assert "routine: Book a table abandoned" in transcripts and "pending date*" in transcripts
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert data is not None
    report = json.loads(data.group(1))
    assert "transcripts" not in report and report["examples"]["author"]["human"][0]["conversation"] == "c2"
    # nothing loaded from outside (links to http(s) citations are allowed: they load nothing)
    assert not re.search(r"""src=["']?https?:""", html)


def test_charts_print_values_and_a_one_day_series_is_a_sentence(page: Path) -> None:
    html = page.read_text()
    assert "All replies fall on one day, 1999-12-31: 14.3% of them (1 of 7 that state an author)" in html
    assert re.search(r'class="value">33\.3%<', html)  # a coverage segment's share, printed on it
    two_days = columns("t", [("d1", 0.05), ("d2", 0.1)], True, "one day")
    assert ">10.0%<" in two_days and ">5.0%<" in two_days and "one day" not in two_days
    assert re.search(r">10\.0%</text>", two_days)  # the axis tops at the data (10%), not at 100%
    assert (nice_top(0.1, True), nice_top(0.37, True), nice_top(0.9, True), nice_top(7, False)) == (0.1, 0.5, 1, 10)


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def _chromium(binary: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"  # a fresh profile each run
    cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


def test_headless_chromium_renders_examples_and_opens_a_transcript(page: Path, chromium: str, tmp_path: Path) -> None:
    shots = {}
    opened = tmp_path / "opened.html"  # every example list and transcript open, as a reader clicking them sees
    opened.write_text(
        re.sub(r'<details (class="ex"|id="t-[0-9a-f]+" class="tr")>', r"<details \1 open>", page.read_text())
    )
    for name, url, size in (
        ("report", page.as_uri(), "1000,1400"),
        ("opened", opened.as_uri(), "1000,5000"),
    ):
        shots[name] = tmp_path / f"{name}.png"
        _chromium(chromium, tmp_path, f"--window-size={size}", f"--screenshot={shots[name]}", url)
        assert _png_size(shots[name]) == tuple(int(x) for x in size.split(","))
        assert shots[name].stat().st_size > 20_000, f"{shots[name]} looks blank"
    # a link to a transcript opens it (the inline script, run by the browser)
    target = anchor("c3")
    dom = _chromium(chromium, tmp_path, "--virtual-time-budget=2000", "--dump-dom", f"{page.as_uri()}#{target}")
    assert re.search(rf'<details id="{target}" class="tr" open(="")?>', dom.stdout)
    other = anchor("c1")
    assert re.search(rf'<details id="{other}" class="tr">', dom.stdout)  # the others stay closed
    print(f"screenshots: {shots['report']} {shots['opened']}")


def test_one_long_value_costs_the_html_and_markdown_reports_a_bounded_part(tmp_path: Path) -> None:
    from converse_tap.a2a.wiretext import bounded_key
    from tests.test_output_hunt import ANSWERED, UNANSWERED, _flow, _write

    reason = "R" * 300_000
    stored = bounded_key(reason)
    root = _write(
        tmp_path / "d",
        [
            _flow("m1", {"answerCoverage": {**UNANSWERED, "reason": reason}}, 0, ctx="c1", text="T" * 300_000),
            _flow("m2", {"answerCoverage": ANSWERED}, 1, ctx="c2"),
        ],
    )
    sizes = {}
    for fmt in ("html", "markdown"):
        out = tmp_path / f"r.{fmt}"
        args = ["report", str(root), "--format", fmt, "--examples", "3", "-o", str(out)]
        assert CliRunner().invoke(cli, args).exit_code == 0
        text = out.read_text()
        sizes[fmt] = len(text) - (text.count(stored) * len(stored))  # what the page holds besides the data island
        assert "R" * 1000 + "…" not in text and "…" in text
    page, island = (tmp_path / "r.html").read_text().split('id="report-data">', 1)
    # the reason is stored bounded (its beginning and the SHA-256 of the whole: docs/schema.md), and shown whole
    # in the data island only (the report's JSON)
    assert stored not in page and stored in island
    html = page + island
    assert "more characters: converse-tap show prints the whole text" in html
    assert max(sizes.values()) < 60_000, sizes
