"""Outputs fed by the wire, second hunt: each test one defect found by feeding crafted values through the real
extractor (wire -> dataset -> output), failing before its fix."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from converse_tap.analysis.render import safe_href
from tests.cli_helpers import invoke
from tests.test_output_hunt import ANSWERED, UNANSWERED, _flow, _write


def _page_text(html: str) -> str:
    """What a browser renders of the report: the page before its JSON data island (a script, never shown)."""
    return html.split('<script type="application/json"', 1)[0]


def test_html_report_shows_bidi_overrides_and_invisible_characters_as_escapes(tmp_path: Path) -> None:
    """The text and Markdown reports escape them; the HTML page rendered a routine `pay\\u202egnp.exe` as
    `payexe.png` and `book\\u200b_table` exactly like `book_table`, in its tables, charts and transcripts."""
    names = ["book_table", "book\u200b_table", "pay\u202egnp.exe", "x\x1b[2Jy"]
    flows = [
        _flow(f"m{i}", {"answerCoverage": UNANSWERED, "routine": {"name": n, "status": "completed"}}, i, ctx=f"c{i}")
        for i, n in enumerate(names)
    ]
    flows.append(_flow("m9", {"answerCoverage": ANSWERED}, 9, ctx="c9", text="see \u202egnp.exe\u2066 \u200b"))
    root = _write(tmp_path / "d", flows)
    out = tmp_path / "r.html"
    assert invoke("report", str(root), "--format", "html", "--by", "routine", "-o", str(out)).exit_code == 0
    page = _page_text(out.read_text(encoding="utf-8"))
    hidden = sorted({hex(ord(c)) for c in page if unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t"})
    assert not hidden, hidden
    assert "book\\u200b_table" in page and "pay\\u202egnp.exe" in page and "x\\x1b[2Jy" in page
    assert "see \\u202egnp.exe\\u2066 \\u200b" in page  # the transcript of an example


def test_a_url_whose_text_would_show_escapes_is_no_link() -> None:
    """A link's text says where it goes: a URL holding a bidi override or an invisible character is shown as text
    (escaped), not made a link whose visible text differs from its target."""
    assert safe_href("https://docs.example/returns") == "https://docs.example/returns"
    for url in ("https://docs.example/\u202egnp.exe", "https://docs.exa\u200bmple/", "https://x.example/\u2066a"):
        assert safe_href(url) is None, url


def test_html_tells_a_control_character_from_its_escape_spelled_out(tmp_path: Path) -> None:
    """Routine `lit\\x1b` (spelled out) and `lit` + ESC: in the chart's labels and tooltips and in the table, the
    ESC is its escape and the spelled-out one has its backslash doubled, so the two never read alike."""
    names = ["lit\\x1b", "lit\x1b"]
    flows = [
        _flow(f"m{i}", {"routine": {"name": n, "status": "completed"}}, i, ctx=f"c{i}") for i, n in enumerate(names)
    ]
    root = _write(tmp_path / "d", flows)
    out = tmp_path / "r.html"
    assert invoke("report", str(root), "--format", "html", "-o", str(out)).exit_code == 0
    page = _page_text(out.read_text(encoding="utf-8"))
    assert "\x1b" not in page
    chart = page.split("Routine instances by outcome", 1)[1].split("</svg>", 1)[0]
    labels = re.findall(r'text-anchor="end">(lit[^<]*)</text>', chart)
    assert sorted(labels) == ["lit\\\\x1b", "lit\\x1b"], labels
    cells = re.findall(r"<td>(lit[^<]*)</td>", page)
    assert sorted(cells) == ["lit\\\\x1b", "lit\\x1b"], cells


def test_the_html_page_of_a_dataset_where_every_exchange_broke_shows_the_anomalies(tmp_path: Path) -> None:
    """Nothing measured (no A2A message could be read), but the exchanges were recorded with why they broke: the
    text and Markdown reports list those anomalies, the HTML's short page left them out."""
    from tests.factories import a2a_flow, write_dataset

    broken = a2a_flow(body=b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}', response=b"{not json")
    root = write_dataset(tmp_path / "d", [broken])
    out = tmp_path / "r.html"
    r = invoke("report", str(root), "--format", "html", "-o", str(out))
    assert r.exit_code == 3  # nothing measured
    page = _page_text(out.read_text(encoding="utf-8"))
    assert "Nothing measured" in page
    assert "invalid_json" in page and "request_without_message" in page


def test_show_text_hash_of_a_dataset_without_a_salt_is_no_plain_sha256(tmp_path: Path) -> None:
    """`show --text hash` ("to share safely") hashed with the dataset's salt, and with none when the dataset had
    none (recorded with --text keep): the plain SHA-256 of "1234" or "yes" is looked up in any table."""
    import hashlib
    import json

    root = _write(tmp_path / "d", [_flow("m1", {"answerCoverage": ANSWERED}, 0, ctx="c1", user_text="1234")])
    assert not (root / "_salt").exists()
    r = invoke("show", str(root), "c1", "--text", "hash", "--format", "json")
    assert r.exit_code == 0
    texts = [m["text"] for m in json.loads(r.stdout)["messages"]]
    assert texts[0].startswith("sha256:") and "1234" not in r.stdout
    assert hashlib.sha256(b"1234").hexdigest() not in r.stdout, texts
