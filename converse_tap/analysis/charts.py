"""Inline SVG charts for the HTML report (no JavaScript, no external files)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from ..htmlsafe import html_text

COLOURS = {
    "answered": "#2e7d32", "partial": "#f9a825", "unanswered": "#c62828", "unclear": "#757575",
    "completed": "#2e7d32", "abandoned": "#c62828", "open": "#90a4ae", "human": "#6a1b9a", "other": "#455a64",
}  # fmt: skip


def _esc(s: Any) -> str:
    return html_text(s)


LABEL = 34  # characters of a bar's label; a longer one is cut in the middle, with "…" (its tooltip is whole)
TIP = 300  # characters of a value in a tooltip or the legend: one long value cannot bloat the page
MAX_BARS = 30  # bars of a chart with one per agent or routine (names from the wire: there may be thousands)


def clip(text: str, limit: int) -> str:
    """`text` in at most `limit` characters: a longer one keeps its head and its tail, "…" between them."""
    if len(text) <= limit:
        return text
    tail = (limit - 1) // 3
    return text[: limit - 1 - tail] + "…" + (text[-tail:] if tail else "")


def bar_labels(labels: list[str], limit: int = LABEL) -> list[str]:
    """Each label clipped (`clip`), and still one per label: two cut to the same text get " #2", " #3", ..."""
    out = [clip(label, limit) for label in labels]
    counts = Counter(out)  # (not `out.count` per label: a dataset of 100,000 routine names made that quadratic)
    taken = set(out)
    seen: dict[str, int] = {}
    for i, short in enumerate(out):
        if counts[short] == 1 or short == labels[i]:
            continue
        n = seen.get(short, 1)
        while True:
            n += 1
            candidate = clip(labels[i], limit - len(f" #{n}")) + f" #{n}"
            if candidate not in taken:
                break
        seen[short] = n
        taken.add(candidate)
        out[i] = candidate
    return out


def _value(v: float, as_share: bool) -> str:
    return f"{v * 100:.1f}%" if as_share else f"{v:g}"


def nice_top(top: float, as_share: bool) -> float:
    """The axis maximum: the data's maximum rounded up to 1, 2, 2.5 or 5 times a power of ten (at most 100%)."""
    if top <= 0:
        return 1.0
    scale = 10 ** math.floor(math.log10(top))
    nice = next(m * scale for m in (1, 2, 2.5, 5, 10) if m * scale >= top - 1e-12)
    return min(nice, 1.0) if as_share else nice


def stacked_bars(
    title: str,
    rows: list[tuple[str, dict[str, float]]],
    keys: list[str],
    as_share: bool,
    totals: list[str] | None = None,
) -> str:
    """Horizontal stacked bars, one per row label; values are shares (0..1) or counts, printed in each segment
    wide enough to hold them; `totals` is printed after each bar (counts print their sum there)."""
    if not rows:
        return ""
    label_w, bar_w, row_h = 220, 520, 24
    height = row_h * len(rows) + 40
    total_max = max((sum(v.values()) for _, v in rows), default=0) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 90}" height="{height}" '
        f'role="img" aria-label="{_esc(title)}" font-size="12">'
    ]
    shown_labels = bar_labels([str(label) for label, _ in rows])
    for i, (label, values) in enumerate(rows):
        y = 8 + i * row_h
        label = clip(str(label), TIP)
        parts.append(
            f"<g><title>{_esc(label)}</title>"
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{_esc(shown_labels[i])}</text></g>'
        )
        x = float(label_w)
        scale = bar_w if as_share else bar_w / total_max
        for k in keys:
            v = values.get(k, 0.0)
            w = v * scale
            if w <= 0:
                continue
            tip = f"{clip(k, TIP)}: {_value(v, as_share)}"
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 6}" '
                f'fill="{COLOURS.get(k, "#607d8b")}"><title>{_esc(label)} {_esc(tip)}</title></rect>'
            )
            shown = _value(v, as_share)
            if w >= 7 * len(shown) + 4:  # the value, where it fits inside its segment
                parts.append(
                    f'<text x="{x + w / 2:.1f}" y="{y + 13}" text-anchor="middle" fill="#fff" '
                    f'class="value">{_esc(shown)}</text>'
                )
            x += w
        total = sum(values.get(k, 0.0) for k in keys)
        end = totals[i] if totals is not None else ("" if as_share else f"{total:g}")
        parts.append(f'<text x="{x + 6:.1f}" y="{y + 14}">{_esc(end)}</text>')
    ly = height - 12
    lx = label_w
    for k in keys:
        parts.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{COLOURS.get(k, "#607d8b")}"/>')
        shown = clip(k, LABEL)
        parts.append(f'<text x="{lx + 14}" y="{ly}">{_esc(shown)}</text>')
        lx += 20 + 8 * len(shown)
    parts.append("</svg>")
    return f"<figure><figcaption>{_esc(title)}</figcaption>{''.join(parts)}</figure>"


def columns(title: str, points: list[tuple[str, float | None]], as_share: bool = True, one_point: str = "") -> str:
    """Vertical bars over ordered labels (e.g. days), each with its value printed above it, on an axis scaled
    to the data; None draws no bar. A single point is not a chart: `one_point` (a sentence) stands instead."""
    if not points:
        return ""
    if len(points) == 1 and one_point:
        return f'<figure><figcaption>{_esc(title)}</figcaption><p class="one-point">{_esc(one_point)}</p></figure>'
    w_each, h = max(24, min(60, 700 // max(1, len(points)))), 160
    width = 50 + w_each * len(points)
    top = nice_top(max((v for _, v in points if v is not None), default=0), as_share)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h + 60}" role="img" '
        f'aria-label="{_esc(title)}" font-size="11">',
        f'<line x1="40" y1="{h}" x2="{width}" y2="{h}" stroke="#999"/>',
    ]
    for frac in (0, 0.5, 1):  # the axis: 0, half and the top, with faint grid lines
        y = h - frac * (h - 20)
        parts.append(f'<text x="36" y="{y + 4:.1f}" text-anchor="end">{_esc(_value(top * frac, as_share))}</text>')
        if frac:
            parts.append(f'<line x1="40" y1="{y:.1f}" x2="{width}" y2="{y:.1f}" stroke="#eee"/>')
    for i, (label, v) in enumerate(points):
        label = clip(str(label), LABEL)
        x = 44 + i * w_each
        if v is not None:
            bh = (v / top) * (h - 20)
            tip = _value(v, as_share)
            parts.append(
                f'<rect x="{x}" y="{h - bh:.1f}" width="{w_each - 4}" height="{bh:.1f}" '
                f'fill="{COLOURS["human"]}"><title>{_esc(label)}: {tip}</title></rect>'
            )
            parts.append(
                f'<text x="{x + (w_each - 4) / 2:.1f}" y="{h - bh - 3:.1f}" text-anchor="middle" '
                f'class="value">{_esc(tip)}</text>'
            )
        parts.append(
            f'<text x="{x + (w_each - 4) / 2}" y="{h + 12}" text-anchor="end" '
            f'transform="rotate(-45 {x + (w_each - 4) / 2} {h + 12})">{_esc(label)}</text>'
        )
    parts.append("</svg>")
    return f"<figure><figcaption>{_esc(title)}</figcaption>{''.join(parts)}</figure>"


def _most(rows: list[tuple[str, Any]], size: Any, what: str, measure: str) -> tuple[list[tuple[str, Any]], str]:
    """At most MAX_BARS rows, those of the largest `size` (ties by label), in their order; and what the caption
    says of the others."""
    if len(rows) <= MAX_BARS:
        return rows, ""
    kept = set(sorted(range(len(rows)), key=lambda i: (-size(rows[i][1]), str(rows[i][0])))[:MAX_BARS])
    said = f": the {MAX_BARS} of {len(rows):,} {what} with the most {measure}"
    return [r for i, r in enumerate(rows) if i in kept], said


def report_charts(report: dict[str, Any]) -> dict[str, list[str]]:
    """Charts keyed by the section title they belong under."""
    groups = report.get("groups", {})
    keys = ["answered", "partial", "unanswered", "unclear"]

    def cov_shares(cov: dict[str, Any]) -> dict[str, float]:
        return {k: (v["share"] or 0.0) for k, v in cov["by_coverage"].items() if cov["turns_assessed"]}

    assessed = [(a, g["coverage"]) for a, g in groups.get("agent", {}).items() if g["coverage"]["turns_assessed"]]
    if not assessed and report["coverage"]["turns_assessed"]:
        assessed = [("all agents", report["coverage"])]
    assessed, of = _most(assessed, lambda c: c["turns_assessed"], "agents", "assessed turns")
    per_agent = [(a, cov_shares(c)) for a, c in assessed]
    totals = [f"{c['turns_assessed']} turns" for _, c in assessed]
    extra = sorted({k for _, v in per_agent for k in v} - set(keys))
    coverage = [stacked_bars(f"Coverage of assessed turns, per agent{of}", per_agent, keys + extra, True, totals)]

    day_groups = groups.get("day", {})
    days = [(d, g["authors"]["human_share"]) for d, g in day_groups.items()]
    sentence = ""
    if len(days) == 1:
        ((day, group),) = day_groups.items()
        a = group["authors"]
        share = "no" if a["human_share"] is None else f"{a['human_share'] * 100:.1f}%"
        sentence = (
            f"All replies fall on one day, {day}: {share} of them ({a['by_author'].get('human', 0)} of "
            f"{a['replies_with_author']} that state an author) were written by a person."
        )
    authors = [columns("Share of replies written by a person, per day", days, True, sentence)] if days else []

    rows = [
        (r["routine"], {"completed": r["completed"], "abandoned": r["abandoned"], "open": r["open"]})
        for r in report["routines"]["by_routine"]
    ]
    rows, of = _most(rows, lambda counts: sum(counts.values()), "routines", "instances")
    routines = (
        [
            stacked_bars(
                f"Routine instances by outcome (abandonment rate beside each routine in the table){of}",
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
