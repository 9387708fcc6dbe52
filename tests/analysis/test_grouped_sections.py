"""The report counts every key of a grouping in one pass (`analysis.tally`, `analysis.sections`): a group must be
exactly the report of its slice alone, and the ungrouped metrics a plain reading of their definitions."""

import re
from collections import Counter
from typing import Any

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from converse_tap.analysis import metrics as m
from converse_tap.analysis.report import build_report
from converse_tap.analysis.stats import wilson
from converse_tap.analysis.tally import NONE, median, tally, value_key
from tests.analysis.frames import covered, frames, messages, routine, sighting

SECTIONS = ("coverage", "authors", "routines", "invocations", "citations")
# values from the wire, placeholders and quotes included: "(none)" from the wire is not a missing value
ODD = st.sampled_from(["x", "(none)", '"q"', "(", "", "a\\b"])
AGENTS = st.sampled_from(["ag_a", "ag_b", "(none)", '"ag"'])


def _cite(*docs: str) -> list[dict[str, Any]]:
    return [{"document_id": d, "chunk_id": "c", "title": d.upper(), "source_url": None} for d in docs]


_ROW = st.tuples(
    AGENTS,
    st.sampled_from(["c1", "c2", "c3"]),
    st.sampled_from(["answered", "partial", "unanswered", None, "(none)"]),
    st.sampled_from(["assessed", "not_recorded", "assessed", "odd"]),
    st.one_of(st.none(), ODD),  # reason
    st.sampled_from(["agent", "human", None, "bot"]),
    st.one_of(st.none(), st.tuples(st.one_of(st.none(), ODD), st.one_of(st.none(), ODD))),  # invocation
    st.lists(st.sampled_from(["d1", "d2", "(d3"]), max_size=2),  # cited documents
    st.one_of(st.none(), st.tuples(st.sampled_from(["book", "(x"]), st.sampled_from(["active", "abandoned"]))),
    st.integers(0, 600),
)


def _sightings(rows: list[tuple]) -> list[dict[str, Any]]:
    out = []
    for i, (agent, conv, cov, avail, reason, author, inv, docs, rt, minute) in enumerate(rows):
        fields: dict[str, Any] = {"author": author, "citations": _cite(*docs), "citation_count": len(docs)}
        if cov is not None:
            fields.update(covered(cov, reason, avail))
        if inv is not None:
            fields.update(invocation_tool_name=inv[0], invocation_outcome=inv[1])
        if rt is not None:
            fields.update(routine(rt[0], rt[1], "date"))
        out.append(sighting(str(i), conv=conv, agent=agent, minute=minute, **fields))
    # a third of the messages are sighted again later (polls): the group keeps the reply once
    return out + [
        {**r, "exchange_id": f"poll-{i}", "ts": r["ts"] + pd.Timedelta(minutes=5)} for i, r in enumerate(out[::3])
    ]


@settings(max_examples=15, deadline=None)
@given(st.lists(_ROW, max_size=16))
def test_a_group_is_the_report_of_its_slice_alone(rows: list[tuple]) -> None:
    """Each agent's group equals the whole report over that agent's messages only, hostile values included.
    (Without --stale-after: staleness is measured from the last reply of the whole dataset, not of the slice.)"""
    seen = _sightings(rows)
    stale = None
    report = build_report(frames(messages(*seen)), by=("agent",), stale_after=stale)
    agents = {value_key(r["agent"]) for r in seen if r["message_id"] is not None}
    groups = report.get("groups", {}).get("agent", {})
    assert set(groups) <= agents
    for agent, group in groups.items():
        alone = build_report(frames(messages(*(r for r in seen if value_key(r["agent"]) == agent))), stale_after=stale)
        assert {s: group[s] for s in SECTIONS} == {s: alone[s] for s in SECTIONS}, agent
    assert sum(g["authors"]["replies"] for g in groups.values()) == report["authors"]["replies"]


_FACT_COLUMNS = ["agent", "coverage_availability", "coverage", "author", "n"]
_FACT = st.fixed_dictionaries(
    {
        "agent": AGENTS,
        "coverage_availability": st.sampled_from(["assessed", "not_recorded", None]),
        "coverage": st.one_of(st.none(), st.just(float("nan")), ODD, st.just("answered")),
        "author": st.one_of(st.none(), ODD),
        "n": st.integers(1, 5),
    }
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_FACT, max_size=30), st.booleans())
def test_the_metrics_are_plain_counts_of_their_definitions(facts: list[dict[str, Any]], weighted: bool) -> None:
    """Over facts (one row each) or counted facts (`n`), the coverage and author metrics are the counts a plain
    reading gives: assessed turns by coverage with a Wilson interval, placeholders apart from wire values."""
    frame = pd.DataFrame(facts, columns=_FACT_COLUMNS)
    if not weighted:
        frame = frame.drop(columns="n")
    weight = [f["n"] if weighted else 1 for f in facts]
    expected: Counter[str] = Counter()
    for f, w in zip(facts, weight, strict=True):
        if f["coverage_availability"] == "assessed":
            expected[NONE if f["coverage"] is None or f["coverage"] != f["coverage"] else value_key(f["coverage"])] += w
    total = sum(expected.values())
    dist = m.coverage_distribution(frame)
    got = {r["value"]: (r["count"], r["share"], r["ci_low"]) for r in dist.to_dict("records")}
    assert got == {v: (n, *wilson(n, total)[:2]) for v, n in expected.items()}
    assert list(dist["count"]) == sorted(expected.values(), reverse=True)
    by_agent = tally(frame[frame["author"].notna()], "agent", "author")
    plain: dict[str, Counter[str]] = {}
    for f, w in zip(facts, weight, strict=True):
        if f["author"] is not None:
            plain.setdefault(f["agent"], Counter())[value_key(f["author"])] += w
    assert by_agent == {a: dict(c) for a, c in plain.items()}


def test_medians_are_numpys() -> None:
    for values in ([3.0], [1.0, 2.0], [5.0, 1.0, 4.0, 2.0], [0.1, 0.7], [1e16, 1e16 + 2.0, 3.0]):
        assert median(values) == float(pd.Series(values).median())
    assert median([]) is None


def test_many_agents_each_get_their_own_group() -> None:
    """A grouping with hundreds of keys (names from the wire) counts each apart."""
    seen = [sighting(f"m{i}", agent=f"ag_{i % 300}", conv=f"c{i}", **covered("answered")) for i in range(900)]
    groups = build_report(frames(messages(*seen)), by=("agent",))["groups"]["agent"]
    assert len(groups) == 300
    assert {g["coverage"]["by_coverage"]["answered"]["count"] for g in groups.values()} == {3}
    assert {g["authors"]["conversations"] for g in groups.values()} == {3}


def test_charts_of_hundreds_of_agents_or_routines_draw_those_with_the_most() -> None:
    """A bar per agent or routine (names from the wire) was a page of thousands of bars: the charts draw the
    MAX_BARS with the most assessed turns or instances, and say how many there were."""
    from converse_tap.analysis.charts import MAX_BARS, report_charts

    seen = [
        sighting(
            f"m{i}", agent=f"ag_{i % 300:03}", conv=f"c{i}", **covered("answered"), **routine(f"r{i % 40}", "completed")
        )
        for i in range(900)
    ]
    seen += [sighting(f"x{i}", agent="ag_busy", conv=f"x{i}", **covered("partial")) for i in range(5)]
    report = build_report(frames(messages(*seen)), by=("agent",))
    charts = report_charts(report)
    (coverage,) = charts["Answer coverage"]
    assert f"per agent: the {MAX_BARS} of 301 agents with the most assessed turns" in coverage
    labels = re.findall(r'text-anchor="end">([^<]*)</text>', coverage)
    assert len(labels) == MAX_BARS and labels[0] == "ag_000" and "ag_busy" in labels  # in their order, the busiest kept
    (routines,) = charts["Routines"]
    assert f"the {MAX_BARS} of 40 routines with the most instances" in routines
    assert len(re.findall(r'text-anchor="end">([^<]*)</text>', routines)) == MAX_BARS
