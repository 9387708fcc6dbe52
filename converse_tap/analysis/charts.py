"""Inline SVG charts for the HTML report (no JavaScript, no external files)."""

from __future__ import annotations

import html
from typing import Any

COLOURS = {
    "answered": "#2e7d32", "partial": "#f9a825", "unanswered": "#c62828", "unclear": "#757575",
    "completed": "#2e7d32", "abandoned": "#c62828", "open": "#90a4ae", "human": "#6a1b9a", "other": "#455a64",
}  # fmt: skip


def _esc(s: Any) -> str:
    return html.escape(str(s))


def stacked_bars(title: str, rows: list[tuple[str, dict[str, float]]], keys: list[str], as_share: bool) -> str:
    """Horizontal stacked bars, one per row label; values are shares (0..1) or counts."""
    if not rows:
        return ""
    label_w, bar_w, row_h = 220, 520, 24
    height = row_h * len(rows) + 40
    total_max = max((sum(v.values()) for _, v in rows), default=0) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 90}" height="{height}" '
        f'role="img" aria-label="{_esc(title)}" font-size="12">'
    ]
    for i, (label, values) in enumerate(rows):
        y = 8 + i * row_h
        parts.append(f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{_esc(label[:34])}</text>')
        x = float(label_w)
        scale = bar_w if as_share else bar_w / total_max
        for k in keys:
            v = values.get(k, 0.0)
            w = v * scale
            if w <= 0:
                continue
            tip = f"{k}: {v * 100:.1f}%" if as_share else f"{k}: {v:g}"
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 6}" '
                f'fill="{COLOURS.get(k, "#607d8b")}"><title>{_esc(label)} {_esc(tip)}</title></rect>'
            )
            x += w
        total = sum(values.get(k, 0.0) for k in keys)
        end = "" if as_share else f"{total:g}"
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 14}">{_esc(end)}</text>')
    ly = height - 12
    lx = label_w
    for k in keys:
        parts.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{COLOURS.get(k, "#607d8b")}"/>')
        parts.append(f'<text x="{lx + 14}" y="{ly}">{_esc(k)}</text>')
        lx += 20 + 8 * len(k)
    parts.append("</svg>")
    return f"<figure><figcaption>{_esc(title)}</figcaption>{''.join(parts)}</figure>"


def columns(title: str, points: list[tuple[str, float | None]], as_share: bool = True) -> str:
    """Vertical bars over ordered labels (e.g. days); None draws no bar."""
    if not points:
        return ""
    w_each, h = max(14, min(60, 700 // max(1, len(points)))), 160
    width = 50 + w_each * len(points)
    top = max((v for _, v in points if v is not None), default=0) or 1
    top = 1.0 if as_share else top
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h + 60}" role="img" '
        f'aria-label="{_esc(title)}" font-size="11">',
        f'<line x1="40" y1="{h}" x2="{width}" y2="{h}" stroke="#999"/>',
        f'<text x="36" y="{h}" text-anchor="end">0</text>',
        f'<text x="36" y="12" text-anchor="end">{"100%" if as_share else f"{top:g}"}</text>',
    ]
    for i, (label, v) in enumerate(points):
        x = 44 + i * w_each
        if v is not None:
            bh = (v / top) * (h - 10)
            tip = f"{v * 100:.1f}%" if as_share else f"{v:g}"
            parts.append(
                f'<rect x="{x}" y="{h - bh:.1f}" width="{w_each - 4}" height="{bh:.1f}" '
                f'fill="{COLOURS["human"]}"><title>{_esc(label)}: {tip}</title></rect>'
            )
        parts.append(
            f'<text x="{x + (w_each - 4) / 2}" y="{h + 12}" text-anchor="end" '
            f'transform="rotate(-45 {x + (w_each - 4) / 2} {h + 12})">{_esc(label)}</text>'
        )
    parts.append("</svg>")
    return f"<figure><figcaption>{_esc(title)}</figcaption>{''.join(parts)}</figure>"


def report_charts(report: dict[str, Any]) -> dict[str, list[str]]:
    """Charts keyed by the section title they belong under."""
    groups = report.get("groups", {})
    keys = ["answered", "partial", "unanswered", "unclear"]

    def cov_shares(cov: dict[str, Any]) -> dict[str, float]:
        return {k: (v["share"] or 0.0) for k, v in cov["by_coverage"].items() if cov["turns_assessed"]}

    per_agent = [
        (a, cov_shares(g["coverage"])) for a, g in groups.get("agent", {}).items() if g["coverage"]["turns_assessed"]
    ]
    if not per_agent and report["coverage"]["turns_assessed"]:
        per_agent = [("all agents", cov_shares(report["coverage"]))]
    extra = sorted({k for _, v in per_agent for k in v} - set(keys))
    coverage = [stacked_bars("Coverage of assessed turns, per agent", per_agent, keys + extra, as_share=True)]

    days = [(d, g["authors"]["human_share"]) for d, g in groups.get("day", {}).items()]
    authors = [columns("Share of replies written by a person, per day", days)] if days else []

    rows = [
        (r["routine"], {"completed": r["completed"], "abandoned": r["abandoned"], "open": r["open"]})
        for r in report["routines"]["by_routine"]
    ]
    routines = (
        [
            stacked_bars(
                "Routine instances by outcome (abandonment rate beside each routine in the table)",
                rows,
                ["completed", "abandoned", "open"],
                as_share=False,
            )
        ]
        if rows
        else []
    )
    return {
        "Answer coverage": [c for c in coverage if c],
        "Authors and ownership": authors,
        "Routines": routines,
    }
