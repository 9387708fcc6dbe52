"""The report as titled tables: one model that the text, Markdown and HTML renderers all draw."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..textsafe import shell_word


@dataclass(frozen=True)
class Link:
    """A cell that is a URL from the data: HTML makes it a link when it is http(s); other formats show the text."""

    url: str

    def __str__(self) -> str:
        return self.url


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[Any]]
    note: str = ""
    # the example conversations behind a row's count (report --examples): row index -> examples; the HTML report
    # opens them from the count in `count_column`, text and Markdown list them in a table of their own
    examples: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    count_column: int = 1
    lists_examples: bool = False  # such a table of examples (the HTML shows them inside the counts instead)


@dataclass
class Section:
    title: str
    tables: list[Table] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def pct(share: float | None) -> str:
    return "–" if share is None else f"{share * 100:.1f}%"


def ci(lo: float | None, hi: float | None) -> str:
    return "–" if lo is None or hi is None else f"{lo * 100:.1f}–{hi * 100:.1f}%"


def num(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:g}" if value == int(value) else f"{value:.1f}"
    return str(value)


def abandoned_key(routine: str, slot: str) -> str:
    """The key of an abandoned-at row in the report's examples: ROUTINE/SLOT, each with its backslashes doubled
    and its slashes written `\\/`, so that routine `a/b` and slot `c` are not routine `a` and slot `b/c`
    (`drill.ABANDONED_KEY` builds the same in SQL)."""
    return "/".join(v.replace("\\", "\\\\").replace("/", "\\/") for v in (routine, slot))


def suggested(command: str, *arguments: str) -> str:
    """A `converse-tap` command line to paste: every argument one shell word (`shell_word`), and after `--` when
    one starts with `-` (a dataset `./-data`, which a path prints as `-data`, or a conversation `--format=json`
    would be read as an option)."""
    words = [shell_word(a) for a in arguments]
    first = next((i for i, a in enumerate(arguments) if a.startswith("-")), None)
    if first is not None:
        words.insert(first, "--")  # (what follows `--` is arguments, whatever it looks like)
    return " ".join(["converse-tap", command, *words])


def measured(report: dict[str, Any]) -> bool:
    """Whether the report rests on anything: at least one A2A message sighted in its window."""
    return bool(report["dataset"]["agent_message_sightings"])


def _drill(
    s: Section,
    report: dict[str, Any],
    breakdown: str,
    label: str,
    key: Callable[[list[Any]], str] = lambda row: str(row[0]),
    count_column: int = 1,
) -> None:
    """Attach the report's examples (report --examples) to the section's last table, and list them below it."""
    found = report.get("examples", {}).get(breakdown)
    if found is None:
        return
    table = s.tables[-1]
    table.count_column = count_column
    table.examples = {i: found[key(row)] for i, row in enumerate(table.rows) if found.get(key(row))}
    rows = [
        [k, e["conversation"], e["agent"] or "–", (e["at"] or "")[:19].replace("T", " "), e["text"]]
        for k, items in found.items()
        for e in items
    ]
    if rows:
        note = "open one: " + suggested("show", str(report["dataset"]["path"]), "CONVERSATION")
        headers = [label, "conversation", "agent", "time", "reply"]
        s.tables.append(Table(f"Examples by {label}", headers, rows, note, lists_examples=True))


def report_sections(report: dict[str, Any]) -> list[Section]:
    ds, cov, auth, rout = report["dataset"], report["coverage"], report["authors"], report["routines"]
    inv, cit, conf = report["invocations"], report["citations"], report["conformance"]
    out: list[Section] = []

    head = Section("Dataset")
    head.lines.append(
        f"{ds['path']}: {ds['exchanges']} exchanges, {ds['replies']} replies, {ds['turns']} turns, "
        f"{len(ds['agents'])} agent(s), {ds['first_seen'] or '–'} to {ds['last_seen'] or '–'}"
    )
    filters = {k: v for k, v in ds["filters"].items() if v}
    if filters:
        head.lines.append("filters: " + ", ".join(f"{k}={v}" for k, v in filters.items()))
    if ds["tables_missing"]:
        head.lines.append("tables missing: " + ", ".join(ds["tables_missing"]))
    head.lines.extend(f"note: {n}" for n in ds["notes"])
    out.append(head)

    s = Section("Answer coverage")
    s.tables.append(
        Table(
            f"Coverage of {cov['turns_assessed']} assessed turns",
            ["coverage", "turns", "share", "95% CI"],
            [[k, v["count"], pct(v["share"]), ci(v["ci_low"], v["ci_high"])] for k, v in cov["by_coverage"].items()],
        )
    )
    _drill(s, report, "coverage", "coverage value")
    if cov["by_reason"]:
        s.tables.append(
            Table(
                "Reasons (assessed turns)",
                ["reason", "turns", "share"],
                [[k, v["count"], pct(v["share"])] for k, v in cov["by_reason"].items()],
            )
        )
    s.tables.append(
        Table(
            f"Availability of {cov['turns_with_coverage']} turns with answerCoverage",
            ["availability", "turns"],
            [[k, v] for k, v in cov["by_availability"].items()],
        )
    )
    out.append(s)

    s = Section("Authors and ownership")
    s.tables.append(
        Table(
            f"Author of {auth['replies_with_author']} replies that state one",
            ["author", "replies"],
            [[k, v] for k, v in auth["by_author"].items()],
            note=f"human share {pct(auth['human_share'])} "
            f"(95% CI {ci(auth['human_share_ci_low'], auth['human_share_ci_high'])})",
        )
    )
    _drill(s, report, "author", "author")
    s.lines.append(
        f"{auth['conversations_with_human']} of {auth['conversations']} conversations had a human-written reply; "
        f"{auth['suppressed_turns']} suppressed turns; ownership went to a person {auth['handoffs_to_human']} "
        f"times and back to the agent {auth['handbacks_to_agent']} times"
    )
    out.append(s)

    s = Section("Routines")
    stale = rout["stale"] is not None
    s.lines.append(
        f"{rout['instances']} instances: {rout['completed']} completed, {rout['abandoned']} abandoned, "
        f"{rout['open']} open"
        + (f" ({rout['stale']} stale)" if stale else "")
        + f"; abandonment rate {pct(rout['abandonment_rate'])} "
        f"(95% CI {ci(rout['abandonment_ci_low'], rout['abandonment_ci_high'])})"
    )
    if rout["by_routine"]:
        headers = ["routine", "instances", "completed", "abandoned", "open"] + (["stale"] if stale else [])
        headers += ["abandonment", "95% CI", "median turns", "median s"]
        rows = []
        for r in rout["by_routine"]:
            row = [r["routine"], r["instances"], r["completed"], r["abandoned"], r["open"]]
            row += [r["stale"]] if stale else []
            row += [
                pct(r["abandonment_rate"]),
                ci(r["ci_low"], r["ci_high"]),
                num(r["median_turns"]),
                num(r["median_seconds"]),
            ]
            rows.append(row)
        s.tables.append(Table("By routine", headers, rows))
    if rout["abandoned_at"]:
        s.tables.append(
            Table(
                "Required input still pending when users abandoned",
                ["routine", "slot", "abandoned"],
                [[r["routine"], r["slot"], r["abandoned"]] for r in rout["abandoned_at"]],
            )
        )
        _drill(s, report, "abandoned_at", "abandoned at", lambda row: abandoned_key(row[0], row[1]), 2)
    out.append(s)

    s = Section("Invocations")
    s.tables.append(
        Table(
            f"Outcomes of {inv['total']} typed routine calls",
            ["outcome", "calls"],
            [[k, v] for k, v in inv["by_outcome"].items()],
        )
    )
    _drill(s, report, "invocation", "invocation outcome")
    if inv["by_tool"]:
        s.tables.append(
            Table(
                "By tool",
                ["tool", "outcome", "calls"],
                [[r["tool"], r["outcome"], r["count"]] for r in inv["by_tool"]],
            )
        )
    out.append(s)

    s = Section("Citations")
    s.lines.append(
        f"{cit['answered_without_citation']} of {cit['answered_turns']} answered turns cite nothing "
        f"({pct(cit['share'])}, 95% CI {ci(cit['ci_low'], cit['ci_high'])})"
    )
    if cit["most_cited"]:
        s.tables.append(
            Table(
                "Most cited documents",
                ["document", "title", "replies"],
                [[r["document_id"], r["title"] or "", r["replies"]] for r in cit["most_cited"]],
            )
        )
    out.append(s)

    s = Section("Conformance")
    s.tables.append(
        Table(
            "Extension adoption",
            ["what", "count", "of", "share", "95% CI"],
            [
                [k.replace("_", " "), v["count"], v["of"], pct(v["share"]), ci(v["ci_low"], v["ci_high"])]
                for k, v in conf["adoption"].items()
            ],
        )
    )
    if conf["anomalies"]:
        s.tables.append(
            Table(
                "Anomalies recorded",
                ["table", "anomaly", "count", "example"],
                [[a["table"], a["code"], a["count"], a["example"]] for a in conf["anomalies"]],
            )
        )
    else:
        s.lines.append("no anomalies recorded")
    if conf["agent_cards"]:
        s.tables.append(
            Table(
                "Agent cards",
                ["agent", "card", "name", "converse", "MCP endpoint", "tools"],
                [
                    [
                        c["agent"],
                        c["source"],
                        c["name"] or "",
                        "yes" if c["converse_declared"] else "no",
                        Link(c["mcp_url"]) if c["mcp_url"] else "",
                        ", ".join(t or "?" for t in c["tools"]),
                    ]
                    for c in conf["agent_cards"]
                ],
            )
        )
    out.append(s)

    for by, groups in report.get("groups", {}).items():
        s = Section(f"By {by}")
        rows = []
        for key, g in groups.items():
            c, a, r = g["coverage"], g["authors"], g["routines"]
            answered = c["by_coverage"].get("answered", {})
            rows.append(
                [
                    key,
                    c["turns_assessed"],
                    pct(answered.get("share")),
                    a["replies_with_author"],
                    pct(a["human_share"]),
                    r["instances"],
                    pct(r["abandonment_rate"]),
                    g["invocations"]["total"],
                ]
            )
        s.tables.append(
            Table(
                "",
                [
                    by,
                    "assessed turns",
                    "answered",
                    "replies w/ author",
                    "human share",
                    "routine instances",
                    "abandonment",
                    "invocations",
                ],
                rows,
            )
        )
        out.append(s)
    return out
