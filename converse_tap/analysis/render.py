"""Render a report dict as terminal text, Markdown, JSON or one self-contained HTML file."""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from typing import Any

from ..textsafe import safe_line
from .charts import report_charts
from .tables import Link, Section, Table, measured, report_sections


def _cell(v: Any) -> str:
    return "" if v is None else str(v)


def _text_table(t: Table) -> list[str]:
    """Every value from the data passes through safe_line: no control character or bidi override reaches a terminal."""
    cells = [[safe_line(_cell(c)) for c in row] for row in t.rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(t.headers)]

    def line(values: list[str]) -> str:
        parts = []
        for i, v in enumerate(values):
            numeric = v[:1].isdigit() or v[:1] == "–" or (v[:1] == "-" and v[1:2].isdigit())
            parts.append(v.rjust(widths[i]) if numeric and i else v.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    out = [safe_line(t.title)] if t.title else []
    out.append(line([safe_line(h) for h in t.headers]))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in cells)
    if t.note:
        out.append(safe_line(t.note))
    return out


def to_text(report: dict[str, Any]) -> str:
    """For a terminal: control characters, line breaks and bidi overrides inside values become visible escapes."""
    lines: list[str] = []
    for s in report_sections(report):
        lines.append(f"== {safe_line(s.title)} ==")
        lines.extend(safe_line(line) for line in s.lines)
        for t in s.tables:
            lines.append("")
            lines.extend(_text_table(t))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


_MD_BREAKS = re.compile(r"[\r\n\v\f\x85\u2028\u2029]+")
_MD_SPECIAL = re.compile(r"[\\|`\[\]<>]|&(?=#?[A-Za-z0-9]+;)")
_MD_REPLACE = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def _md_escape(v: Any) -> str:
    """Inline Markdown text: no table break-out (`|`, line breaks), no code span, link, autolink or raw HTML.

    Control characters are shown as escapes (a Markdown file is read in terminals too).
    """
    s = _MD_BREAKS.sub(" ", _cell(v))
    return safe_line(_MD_SPECIAL.sub(lambda m: _MD_REPLACE.get(m.group(), "\\" + m.group()), s))


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
    return json.dumps(report, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


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
    """The URL when a browser may follow it from a report (http or https, nothing a browser would reinterpret)."""
    return url if _WEB_URL.fullmatch(url) else None


def _html_value(v: Any) -> str:
    s = _cell(v)
    if isinstance(v, Link) and (href := safe_href(v.url)) is not None:
        return f'<a href="{html.escape(href, quote=True)}" rel="noopener noreferrer nofollow">{html.escape(s)}</a>'
    return html.escape(s)


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.headers)
    body = []
    for row in t.rows:
        cells = []
        for v in row:
            s = _cell(v)
            cls = ' class="n"' if s[:1].isdigit() or s[:1] == "–" else ""
            cells.append(f"<td{cls}>{_html_value(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{html.escape(t.title)}</caption>" if t.title else ""
    note = f'<p class="note">{html.escape(t.note)}</p>' if t.note else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{note}"


def _html_section(s: Section, charts: dict[str, list[str]]) -> str:
    parts = [f"<h2>{html.escape(s.title)}</h2>"]
    parts += [f"<p>{html.escape(line)}</p>" for line in s.lines]
    parts += charts.get(s.title, [])
    parts += [_html_table(t) for t in s.tables]
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
    f"default-src 'none'; script-src {_sha256(_SCRIPT)}; style-src {_sha256(_CSS)}; img-src data:; "
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
    nothing was measured, and the cards if any were seen, not a page of zero tables.
    """
    sections = report_sections(report)
    if measured(report):
        charts = report_charts(report)
    else:
        charts = {}
        keep = {"Dataset", "Conformance"} if report["conformance"]["agent_cards"] else {"Dataset"}
        sections = [s for s in sections if s.title in keep]
        sections[0].lines.insert(0, "Nothing measured: no A2A message in this dataset or window.")
    body = "\n".join(_html_section(s, charts) for s in sections)
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CSP, quote=True)}">'
        f'<meta name="referrer" content="no-referrer"><title>converse-tap report</title>'
        f"<style>{_CSS}</style></head><body><h1>converse-tap report</h1>\n{body}\n"
        f'<script type="application/json" id="report-data">{json_island(report)}</script>'
        f"<script>{_SCRIPT}</script></body></html>\n"
    )


FORMATS = {"text": to_text, "json": to_json, "markdown": to_markdown, "html": to_html}
