"""Render a report dict as terminal text, Markdown, JSON or one self-contained HTML file."""

from __future__ import annotations

import html
import json
from typing import Any

from .charts import report_charts
from .tables import Section, Table, measured, report_sections


def _cell(v: Any) -> str:
    return "" if v is None else str(v)


def _text_table(t: Table) -> list[str]:
    cells = [[_cell(c) for c in row] for row in t.rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(t.headers)]

    def line(values: list[str]) -> str:
        parts = []
        for i, v in enumerate(values):
            numeric = v[:1].isdigit() or v[:1] == "–" or (v[:1] == "-" and v[1:2].isdigit())
            parts.append(v.rjust(widths[i]) if numeric and i else v.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    out = [t.title] if t.title else []
    out.append(line(t.headers))
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r) for r in cells)
    if t.note:
        out.append(t.note)
    return out


def to_text(report: dict[str, Any]) -> str:
    lines: list[str] = []
    for s in report_sections(report):
        lines.append(f"== {s.title} ==")
        lines.extend(s.lines)
        for t in s.tables:
            lines.append("")
            lines.extend(_text_table(t))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _md_escape(v: Any) -> str:
    return _cell(v).replace("|", "\\|").replace("\n", " ")


def to_markdown(report: dict[str, Any]) -> str:
    lines = ["# converse-tap report", ""]
    for s in report_sections(report):
        lines.append(f"## {s.title}")
        lines.append("")
        for line in s.lines:
            lines.append(line + "  ")
        for t in s.tables:
            lines.append("")
            if t.title:
                lines.append(f"**{t.title}**")
                lines.append("")
            lines.append("| " + " | ".join(_md_escape(h) for h in t.headers) + " |")
            lines.append("|" + "|".join("---" for _ in t.headers) + "|")
            lines.extend("| " + " | ".join(_md_escape(c) for c in r) + " |" for r in t.rows)
            if t.note:
                lines.append("")
                lines.append(t.note)
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


def _html_table(t: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t.headers)
    body = []
    for row in t.rows:
        cells = []
        for v in row:
            s = _cell(v)
            cls = ' class="n"' if s[:1].isdigit() or s[:1] == "–" else ""
            cells.append(f"<td{cls}>{html.escape(s)}</td>")
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


def to_html(report: dict[str, Any]) -> str:
    """One file, no external resources: tables plus inline SVG charts. A report that measured nothing is a short
    page: what was read, why nothing was measured, and the cards if any were seen, not a page of zero tables."""
    sections = report_sections(report)
    if measured(report):
        charts = report_charts(report)
    else:
        charts = {}
        keep = {"Dataset", "Conformance"} if report["conformance"]["agent_cards"] else {"Dataset"}
        sections = [s for s in sections if s.title in keep]
        sections[0].lines.insert(0, "Nothing measured: no A2A message in this dataset or window.")
    body = "\n".join(_html_section(s, charts) for s in sections)
    # script content is raw text: only "</" could end it early
    data = json.dumps(report, ensure_ascii=False, allow_nan=False).replace("</", "<\\/")
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8><title>converse-tap report</title>"
        f"<style>{_CSS}</style></head><body><h1>converse-tap report</h1>\n{body}\n"
        f'<script type="application/json" id="report-data">{data}</script></body></html>\n'
    )


FORMATS = {"text": to_text, "json": to_json, "markdown": to_markdown, "html": to_html}
