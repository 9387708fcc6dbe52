"""Render a report dict as terminal text, Markdown, JSON or one self-contained HTML file."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import textwrap
import unicodedata
from typing import Any

from ..htmlsafe import html_text
from ..textsafe import is_terminal_safe, json_safe, safe_line
from .charts import LABEL, clip, report_charts
from .html_drill import CSS as drill_css
from .html_drill import SCRIPT as drill_script
from .html_drill import examples_cell, transcripts_section
from .tables import Link, Section, Table, measured, report_sections


def _cell(v: Any) -> str:
    return "" if v is None else str(v)


def _numeric(v: str) -> bool:
    return v[:1].isdigit() or v[:1] == "–" or (v[:1] == "-" and v[1:2].isdigit())


def columns(text: str) -> int:
    """Terminal columns `text` takes: an East Asian wide or fullwidth character two, a combining mark none."""
    if text.isascii():
        return len(text)
    return sum(_char_columns(c) for c in text)


def _char_columns(c: str) -> int:
    if c.isascii():
        return 1
    if unicodedata.combining(c) or unicodedata.category(c) in ("Mn", "Me"):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1


def _take(v: str, w: int) -> tuple[str, str]:
    """The longest head of `v` that fits `w` columns, and the rest."""
    used = 0
    for i, c in enumerate(v):
        used += _char_columns(c)
        if used > w:
            return v[:i], v[i:]
    return v, ""


def _clip(v: str, w: int) -> str:
    """`v` in at most `w` columns: cut, with "…" at its end, when it does not fit."""
    return v if columns(v) <= w else _take(v, max(w - 1, 0))[0] + "…"


def _pad(v: str, w: int, right: bool = False) -> str:
    fill = " " * max(w - columns(v), 0)
    return fill + v if right else v + fill


def _chunks(v: str, w: int) -> list[str]:
    """`v` cut into pieces of at most `w` columns (at least one character each)."""
    out = []
    while v:
        head, v = _take(v, w)
        if not head:  # a wide character in a one-column room
            head, v = v[:1], v[1:]
        out.append(head)
    return out or [""]


MIN_COLUMN = 8  # a text column is not abbreviated below this (or its natural width, when narrower)
DOCUMENT_VALUE = 1000  # characters of one value in a Markdown or HTML table, cut with "…" beyond (JSON has it whole)
CELL_COLUMNS = 120  # a value is cut (with "…") beyond this, terminal or not: one long value cannot widen every row


def fit_widths(headers: list[str], cells: list[list[str]], width: int | None) -> list[int] | None:
    """Column widths (in terminal columns): natural when they fit `width` (or when width is None). Else the widest
    columns narrowed in turn: text columns down to MIN_COLUMN (values abbreviated), numeric ones down to their
    values, their headers wrapped onto more lines (first at word boundaries, then abbreviated). None when even
    that does not fit."""
    natural = [max([columns(h)] + [columns(r[i]) for r in cells]) for i, h in enumerate(headers)]
    gaps = 2 * (len(headers) - 1)
    if width is None or sum(natural) + gaps <= width:
        return natural
    k = range(len(headers))
    numeric = [bool(cells) and all(_numeric(r[i]) or not r[i] for r in cells) for i in k]
    values = [max([1] + [columns(r[i]) for r in cells]) for i in k]
    words = [max([1] + [columns(w) for w in h.split()]) for h in headers]
    widths = list(natural)
    excess = sum(widths) + gaps - width
    for floor in (
        [max(values[i], words[i]) if numeric[i] else natural[i] for i in k],  # numeric headers wrapped at spaces
        [max(values[i], words[i]) if numeric[i] else min(natural[i], MIN_COLUMN) for i in k],  # values abbreviated
        [max(values[i], 4) if numeric[i] else min(natural[i], MIN_COLUMN) for i in k],  # header words abbreviated
    ):
        while excess > 0:
            shrinkable = [i for i in k if widths[i] > floor[i]]
            if not shrinkable:
                break
            i = max(shrinkable, key=lambda j: widths[j])
            widths[i] -= 1
            excess -= 1
        if excess <= 0:
            return widths
    return None


def _header_rows(headers: list[str], widths: list[int]) -> list[list[str]]:
    """Headers on as many lines as their widths need: wrapped at spaces, a word too long abbreviated."""
    wrapped = [
        [_clip(part, w) for part in (_words(h, w) if columns(h) > w else [h]) or [""]]
        for h, w in zip(headers, widths, strict=True)
    ]
    depth = max(len(lines) for lines in wrapped)
    return [[lines[n] if n < len(lines) else "" for lines in wrapped] for n in range(depth)]


def _words(text: str, w: int) -> list[str]:
    """`text` wrapped at spaces into lines of at most `w` columns (a longer word on a line of its own)."""
    lines: list[str] = []
    for word in text.split():
        if lines and columns(lines[-1]) + 1 + columns(word) <= w:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def table_lines(
    title: str, headers: list[str], cells: list[list[str]], note: str = "", width: int | None = None
) -> list[str]:
    """A table as text lines. A value is cut at CELL_COLUMNS (with "…"). With a width (a terminal's), every line
    fits it: columns narrowed (values abbreviated with "…", headers wrapped), or, when the columns cannot fit
    however narrowed, one block of "header  value" lines per row. Every string passes through safe_line (once:
    callers pass the raw text): no control character, bidi override or invisible character reaches a terminal,
    and widths are counted in terminal columns (a wide character takes two)."""
    title, note, headers = safe_line(title), safe_line(note), [safe_line(h) for h in headers]
    cells = [[_clip(safe_line(c), CELL_COLUMNS) for c in row] for row in cells]
    widths = fit_widths(headers, cells, width)
    out = _wrap(title, width) if title else []
    if widths is None:
        assert width is not None
        return out + _vertical(headers, cells, width) + (_wrap(note, width) if note else [])

    def line(values: list[str]) -> str:
        parts = []
        for i, v in enumerate(values):
            v = _clip(v, widths[i])
            parts.append(_pad(v, widths[i], right=bool(_numeric(v) and i)))
        return "  ".join(parts).rstrip()

    out.extend(line(row) for row in _header_rows(headers, widths))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in cells)
    if note:
        out.extend(_wrap(note, width))
    return out


def _vertical(headers: list[str], cells: list[list[str]], width: int) -> list[str]:
    label = min(max(columns(h) for h in headers), width // 3)
    out = []
    for n, row in enumerate(cells, 1):
        out.append(_clip(f"-[ {n} ]" + "-" * width, width))
        for h, v in zip(headers, row, strict=True):
            chunks = _chunks(v, width - label - 2)
            out.append(f"{_pad(_clip(h, label), label)}  {chunks[0]}".rstrip())
            out.extend(f"{'':{label}}  {c}".rstrip() for c in chunks[1:])
    return out


def _wrap(text: str, width: int | None) -> list[str]:
    if width is None or columns(text) <= width:
        return [text]
    lines = textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]
    return [piece for line in lines for piece in _chunks(line, width)]  # textwrap counts characters, not columns


def _text_table(t: Table, width: int | None = None) -> list[str]:
    """Every value from the data passes through safe_line (in table_lines): no control character, bidi override or
    invisible character reaches a terminal."""
    cells = [[_cell(c) for c in row] for row in t.rows]
    return table_lines(t.title, list(t.headers), cells, t.note, width)


def to_text(report: dict[str, Any], width: int | None = None) -> str:
    """Terminal text; with `width` (a terminal's columns) every line fits it, without it nothing is cut. Control
    characters, line breaks and bidi overrides inside values become visible escapes."""
    lines: list[str] = []
    for s in report_sections(report):
        lines.extend(_wrap(f"== {safe_line(s.title)} ==", width))
        for text in s.lines:
            lines.extend(_wrap(safe_line(text), width))
        for t in s.tables:
            lines.append("")
            lines.extend(_text_table(t, width))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def terminal_width(stream: Any) -> int | None:
    """The columns of the terminal `stream` writes to (at least 40), or None when it is not a terminal."""
    try:
        if not stream.isatty():
            return None
        return max(os.get_terminal_size(stream.fileno()).columns, 40)
    except (AttributeError, OSError, ValueError):
        return None


_MD_BREAKS = re.compile(r"[\r\n\v\f\x85\u2028\u2029]+")
# backslash-escaped (or, for <, > and &, written as entities): what would make a table break, code span, link,
# image (no `](` without `[` and `]`), raw HTML or emphasis (`*_~`); and what would make an autolink (GFM's and
# linkify's: a scheme's `://`, a dot before a domain's next label, the `@` of an address or a mention): an escape
# splits the text where an autolinker looks for them
_MD_SPECIAL = re.compile(
    r"[\\|`\[\]<>*~@]|&(?=#?[A-Za-z0-9]+;)|:(?=//)|\.(?=[^\W\d_])"
    r"|_(?![^\W_])|(?<![^\W_])_"  # `_` but between letters or digits (snake_case), where it cannot make emphasis
)
_MD_REPLACE = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _md_escape(v: Any) -> str:
    """Inline Markdown text: no table break-out (`|`, line breaks), no code span, link, autolink, emphasis or raw
    HTML: a renderer shows the very text, whatever it is (a URL stays text).

    Control characters are shown as escapes (a Markdown file is read in terminals too).
    """
    s = _MD_BREAKS.sub(" ", clip(_cell(v), DOCUMENT_VALUE))
    s = safe_line(s)  # first: the backslashes of its escapes are escaped for Markdown in turn
    return _MD_SPECIAL.sub(lambda m: _MD_REPLACE.get(m.group(), "\\" + m.group()), s)


def to_markdown(report: dict[str, Any]) -> str:
    """Every value from the data is escaped: a Markdown renderer makes no link, image or HTML of it."""
    lines = ["# converse-tap report", ""]
    for s in report_sections(report):
        lines.append(f"## {_md_escape(s.title)}")
        lines.append("")
        for line in s.lines:
            lines.append(_md_escape(line) + "  ")
        for t in s.tables:
            lines.append("")
            if t.title:
                lines.append(f"**{_md_escape(t.title)}**")
                lines.append("")
            lines.append("| " + " | ".join(_md_escape(h) for h in t.headers) + " |")
            lines.append("|" + "|".join("---" for _ in t.headers) + "|")
            lines.extend("| " + " | ".join(_md_escape(c) for c in r) + " |" for r in t.rows)
            if t.note:
                lines.append("")
                lines.append(_md_escape(t.note))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def to_json(report: dict[str, Any]) -> str:
    return json_safe(json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False)) + "\n"


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:70em;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0 1.2em}
th,td{padding:.25em .7em;border-bottom:1px solid #eee;text-align:left}
th{background:#f6f6f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
caption{text-align:left;font-weight:600;
padding:.3em 0}.note{color:#555}figure{margin:1em 0}figcaption{font-weight:600;margin-bottom:.3em}
"""


_WEB_URL = re.compile(r"https?://[^\x00-\x20\x7f-\x9f\\]+", re.IGNORECASE)


def safe_href(url: str) -> str | None:
    """The URL when a browser may follow it from a report (http or https, nothing a browser would reinterpret, and
    nothing its text would show as an escape: a link's text says where it goes)."""
    return url if _WEB_URL.fullmatch(url) and is_terminal_safe(url) else None


def _html_value(v: Any) -> str:
    s = clip(_cell(v), DOCUMENT_VALUE)
    if isinstance(v, Link) and (href := safe_href(v.url)) is not None:
        if s != v.url:  # a URL cut short is no link: its text would not say where it goes
            return html_text(s)
        return f'<a href="{html.escape(href, quote=True)}" rel="noopener noreferrer nofollow">{html_text(s)}</a>'
    return html_text(s)


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html_text(h)}</th>" for h in t.headers)
    body = []
    for r, row in enumerate(t.rows):
        cells = []
        for i, v in enumerate(row):
            s = _cell(v)
            cls = ' class="n"' if s[:1].isdigit() or s[:1] == "–" else ""
            if i == t.count_column and t.examples.get(r):  # the count opens the conversations behind it
                label = " / ".join(clip(_cell(c), LABEL) for c in row[: t.count_column])
                cells.append(f"<td{cls}>{examples_cell(s, t.examples[r], label)}</td>")
                continue
            cells.append(f"<td{cls}>{_html_value(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{html_text(t.title)}</caption>" if t.title else ""
    note = f'<p class="note">{html_text(t.note)}</p>' if t.note else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{note}"


def _html_section(s: Section, charts: dict[str, list[str]]) -> str:
    parts = [f"<h2>{html_text(s.title)}</h2>"]
    parts += [f"<p>{html_text(line)}</p>" for line in s.lines]
    parts += charts.get(s.title, [])
    parts += [_html_table(t) for t in s.tables if not t.lists_examples]  # those open from their counts
    return "\n".join(parts)


# the report's own script: parses the data island, leaves it as `converseReport` and says how that went
_SCRIPT = (
    'try{window.converseReport=JSON.parse(document.getElementById("report-data").textContent);'
    'document.documentElement.setAttribute("data-report","parsed")}'
    'catch(e){document.documentElement.setAttribute("data-report","broken")}'
)


def _sha256(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii") + "'"


# no script but the one above, no style but the sheet above, nothing fetched (the SVG charts are inline)
CSP = (
    f"default-src 'none'; script-src {_sha256(_SCRIPT + drill_script)}; "
    f"style-src {_sha256(_CSS + drill_css)}; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)
_ISLAND_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_ISLAND_SPECIAL = re.compile("[<>&\u2028\u2029]")


def json_island(report: dict[str, Any]) -> str:
    """The report as JSON that no string can break out of a <script> element with (nor open a comment in)."""
    data = json.dumps(report, ensure_ascii=False, allow_nan=False)
    return _ISLAND_SPECIAL.sub(lambda m: _ISLAND_ESCAPES[m.group()], data)


def to_html(report: dict[str, Any]) -> str:
    """One file, no external resources: tables plus inline SVG charts, the data as a JSON island.

    Every value is escaped for where it lands (text, attribute); links only to http(s); a Content-Security-Policy
    lets no script run but the report's own. A report that measured nothing is a short page: what was read, why
    nothing was measured, and the cards and anomalies if any were seen, not a page of zero tables.
    """
    sections = report_sections(report)
    if measured(report):
        charts = report_charts(report)
    else:
        charts = {}
        conformance = report["conformance"]  # cards seen, or exchanges that broke: what there is to look at
        keep = {"Dataset", "Conformance"} if conformance["agent_cards"] or conformance["anomalies"] else {"Dataset"}
        sections = [s for s in sections if s.title in keep]
        sections[0].lines.insert(0, "Nothing measured: no A2A message in this dataset or window.")
    body = "\n".join(_html_section(s, charts) for s in sections)
    body += "\n" + transcripts_section(report)
    data = {k: v for k, v in report.items() if k != "transcripts"}  # the transcripts are in the page already
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CSP, quote=True)}">'
        f'<meta name="referrer" content="no-referrer"><title>converse-tap report</title>'
        f"<style>{_CSS}{drill_css}</style></head><body><h1>converse-tap report</h1>\n{body}\n"
        f'<script type="application/json" id="report-data">{json_island(data)}</script>'
        f"<script>{_SCRIPT + drill_script}</script></body></html>\n"
    )


FORMATS = {"text": to_text, "json": to_json, "markdown": to_markdown, "html": to_html}
