"""The report's headline numbers against an independent reference written from docs/metrics.md alone.

`reference` (tests/analysis/metrics_reference.py) computes, in plain Python over the stored rows, the facts the
document defines (sightings -> replies -> turns, conversations, routine instances) and the figures the report shows
from them; hypothesis builds adversarial datasets (several agents and files, conversations interleaved, the same
reply sighted in several files and exchanges with different verdicts, ties in one microsecond, rows stored twice,
nulls and unknown enum values, routines that end and restart, messages without ids, a clock that goes backwards)
and the report of DuckDB (and, on a few, of Spark) must equal the reference number for number.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converse_tap.a2a.constants import PUSH_AGENT
from converse_tap.analysis.engine import Engine
from converse_tap.analysis.load import Window
from converse_tap.analysis.report import build_report
from converse_tap.store.schema import AGENT_CARDS, EXCHANGES, MESSAGES, with_version
from tests.analysis.metrics_reference import GROUPS, STALE, T0, at, day_of, from_report, reference

_WRITTEN = {"location": "result.message", "agent_url": "http://a/", "binding": "jsonrpc", "dialect": "v1.0"}
_WRITTEN |= {"method": "SendMessage", "object_kind": "message", "direction": "response", "has_envelope": True}
_CALLED = {"agent_url": "http://a/", "binding": "jsonrpc", "dialect": "v1.0", "method": "SendMessage"}
_CALLED |= {"converse_requested": False, "converse_echoed": False, "streamed": False, "complete": True}
_CALLED |= {"messages": 0, "replies": 0}
_CARD = {"agent_url": "http://a/", "source": "well-known", "converse_declared": False}
TABLES = {"messages": (MESSAGES, "ts", _WRITTEN), "exchanges": (EXCHANGES, "ts_start", _CALLED)}
TABLES["agent_cards"] = (AGENT_CARDS, "ts", _CARD)

# --- the dataset: rows as a recorder (or an attacker with write access) leaves them --------------------------------


def write(root: Path, files: list[list[dict[str, Any]]], table: str = "messages") -> list[dict[str, Any]]:
    """Each list of rows as one Parquet file of a table (messages, exchanges, agent_cards), in that order, split
    into the date partitions of their times as a recorder writes them (an untimed row in the first day's); returns
    the rows with their place in the data (`pos`: partition, file, then row), as the dataset lists them."""
    schema, ts, written = TABLES[table]
    placed = []
    for i, rows in enumerate(files):
        days: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            days.setdefault(day_of(r.get(ts)) if r.get(ts) is not None else "2026-12-01", []).append(r)
        for day, part in sorted(days.items()):
            folder = root / table / f"date={day}"
            folder.mkdir(parents=True, exist_ok=True)
            arrays = []
            for f in schema:
                plain = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
                arrays.append(pa.array([r.get(f.name, written.get(f.name)) for r in part], plain))
            data = pa.Table.from_arrays(arrays, names=schema.names).cast(schema)
            pq.write_table(
                data.replace_schema_metadata(with_version(schema).metadata), folder / f"part-{i:03d}.parquet"
            )
            placed += [{**written, **r, "pos": (day, i, j)} for j, r in enumerate(part)]
    return placed


def _slot(key: str, required: bool) -> dict[str, Any]:
    return {"key": key, "type": "string", "required": required, "description": None}


def _cite(doc: str) -> dict[str, Any]:
    return {"document_id": doc, "chunk_id": None, "title": None, "source_url": None}


def _opt(*values: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from([None, *values])


ROW_FIELDS = (
    "author", "coverage_availability", "coverage", "coverage_reason", "originating_turn_id", "ownership_state",
    "ownership_suppressed", "routine_tool_name", "pending_input", "invocation_tool_name", "invocation_outcome",
    "citations", "citation_count", "task_id",
)  # fmt: skip
ROW = st.fixed_dictionaries(
    {
        "agent": st.sampled_from(["A", "B", "(x", PUSH_AGENT]),
        "message_id": _opt("m1", "m2", "m3", "m4"),
        "exchange_id": st.sampled_from(["e1", "e2", "e3"]),
        "seq": st.integers(0, 1),
        # few distinct times: ties; rows written later may be earlier (the clock going backwards); some untimed
        "ts": st.one_of(st.builds(at, st.integers(0, 6), st.sampled_from([0, 0, 1])), st.just(None)),
        "context_id": _opt("c1", "c2"),
        "task_id": _opt("t1", "t2", "t3"),
        "role": st.sampled_from(["agent", "agent", "agent", "user", None]),
        "direction": st.sampled_from(["response", "response", "response", "request"]),
        "object_kind": st.sampled_from(["message", "message", "message", "artifact"]),
        "has_envelope": st.sampled_from([True, True, True, False]),
        "author": _opt("agent", "human", "bot", "(none)"),
        "coverage_availability": _opt("assessed", "assessed", "not_recorded", "(weird"),
        "coverage": _opt("answered", "answered", "partial", "mostly"),
        "coverage_reason": _opt("sufficient_evidence", "vibes"),
        "originating_turn_id": _opt("u1", "u2"),
        "ownership_state": _opt("ai_owned", "human_owned", "limbo"),
        "ownership_suppressed": _opt(True, False),
        "routine_name": _opt("R", "R", "(S"),
        "routine_tool_name": _opt("book"),
        "routine_status": _opt("active", "waiting_for_input", "completed", "abandoned", "abandoned", "paused"),
        "pending_input": _opt([], [_slot("date", True), _slot("size", False)], [_slot("size", True)]),
        "invocation_tool_name": _opt("book", "(t"),
        "invocation_outcome": _opt("started", "declined", "zzz"),
        "citations": _opt([], [_cite("d1")], [_cite("d1"), _cite("d1"), _cite("(d")]),
        "anomalies": _opt([], ["missing:author"], ["unknown_enum:coverage=x", "missing:author", "missing:author"]),
    }
).map(lambda r: {**r, "citation_count": None if r["citations"] is None else len(r["citations"])})


@st.composite
def script(draw: st.DrawFn, n: int) -> list[dict[str, Any]]:
    """One conversation of one agent, in order: a routine moving through its statuses (ending, restarting),
    ownership passing between the agent and a person; ids unique to the script, times rising (some equal)."""
    agent, conv = draw(st.sampled_from(["A", "B", "(x"])), f"c{n}"
    minute, rows = draw(st.integers(0, 3)), []
    for i in range(draw(st.integers(2, 7))):
        minute += draw(st.sampled_from([0, 1, 1, 2, 3]))
        row = draw(ROW)
        row.update(
            agent=agent, context_id=conv, message_id=f"{conv}-{i}", role="agent", direction="response",
            object_kind="message", has_envelope=True, ts=T0 + timedelta(minutes=minute),
            ownership_state=draw(st.sampled_from(["ai_owned", "human_owned", "human_owned", None])),
            routine_name="R", routine_status=draw(st.sampled_from(["active", "waiting_for_input", "completed",
                                                                   "abandoned", "abandoned", None])),
        )  # fmt: skip
        rows.append(row)
    return rows


@st.composite
def datasets(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """One to three files holding loose rows and scripted conversations interleaved (a script's rows may land in
    an earlier file than the rows before them: the clock going backwards); some rows sighted again (a poll,
    another exchange, another verdict) or stored twice."""
    rows = draw(st.lists(ROW, max_size=6))
    for n in range(draw(st.integers(0, 2))):
        for row in draw(script(n)):
            rows.insert(draw(st.integers(0, len(rows))) if draw(st.booleans()) else len(rows), row)
    if not rows:
        rows = [draw(ROW)]
    said = [r for r in rows if r["role"] == "agent" and r["direction"] == "response" and r["has_envelope"]]
    for _ in range(draw(st.integers(0, 5))):
        row = draw(st.sampled_from(said if said and draw(st.booleans()) else rows))
        how = draw(st.sampled_from(["twice", "poll", "verdict"]))
        again = dict(row)
        if how == "poll":
            again.update(exchange_id=draw(st.sampled_from(["e4", "e5"])), ts=draw(ROW)["ts"])
        elif how == "verdict":
            other = draw(ROW)
            for f in ("coverage", "coverage_availability", "routine_status", "author", "ownership_state", "ts"):
                again[f] = other[f]
        rows.insert(draw(st.integers(0, len(rows))), again)
    n_files = draw(st.integers(1, 3))
    files: list[list[dict[str, Any]]] = [[] for _ in range(n_files)]
    for row in rows:
        files[draw(st.integers(0, n_files - 1))].append(row)
    return [f for f in files if f]


ORACLE = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
WINDOWS = [
    Window(),
    Window(agents=("A",)),
    Window(agents=("B", "(x")),
    Window(agents=(PUSH_AGENT, "A")),
    Window(since=at(3)),  # midnight, exactly at some rows' time
    Window(until=at(3)),  # the same bound as an end: the rows at it are out
    Window(since=at(2), until=at(4, 1)),  # a row at 4 min is in, one at 4 min and 1 µs is out
    Window(agents=("A", PUSH_AGENT), since=at(1, 1), until=at(5)),
]
STALES = [STALE, timedelta(minutes=1), timedelta(minutes=3), timedelta(minutes=2, microseconds=1)]


def duckdb_report(root: Path, window: Window, stale: timedelta = STALE) -> dict[str, Any]:
    with Engine.over_dataset(root, window) as engine:
        report = build_report(engine, window, by=tuple(GROUPS), stale_after=pd.Timedelta(stale))
    return json.loads(json.dumps(report, default=str))


def check(report: dict[str, Any], want: dict[str, Any]) -> None:
    """The report's figures equal the reference's `want`, group by group."""
    got = from_report(report)
    assert got["sightings"] == want["sightings"]
    assert got["all"] == want["all"]
    for g in GROUPS:
        assert got[g].keys() == want[g].keys(), g
        for key, figs in want[g].items():
            assert got[g][key] == figs, (g, key)


@ORACLE
@given(files=datasets(), w=st.sampled_from(range(len(WINDOWS))), s=st.sampled_from(STALES))
def test_duckdb_report_equals_the_reference(
    tmp_path_factory: Any, files: list[list[dict[str, Any]]], w: int, s: timedelta
) -> None:
    root = tmp_path_factory.mktemp("oracle")
    rows = write(root, files)
    check(duckdb_report(root, WINDOWS[w], s), reference(rows, WINDOWS[w], stale=s))


def _status(mid: str, minute: int | None, status: str) -> dict[str, Any]:
    row = {f: None for f in ROW_FIELDS} | dict(agent="A", exchange_id=f"e-{mid}", seq=0, context_id="c1")
    ts = None if minute is None else T0 + timedelta(minutes=minute)
    return row | dict(message_id=mid, ts=ts, role="agent", routine_name="R", routine_status=status)


def test_an_instance_ended_by_an_untimed_status_has_no_duration(tmp_path: Path) -> None:
    """A status without a time (a file another tool wrote) is ordered last: it ends the instance, whose duration is
    then unknown. The instance's end was the latest time among its statuses: 180 s to a completion at no time."""
    files = [[_status("m1", 0, "active"), _status("m2", 3, "waiting_for_input"), _status("m3", None, "completed")]]
    files.append([_status("n1", 0, "active"), _status("n2", None, "waiting_for_input")])  # open, idle unknown
    files[1] = [{**r, "context_id": "c2"} for r in files[1]]
    files.append([_status("k1", 0, "active"), _status("k2", 1, "completed"), {**_status("z", 9, "x"), "agent": "B"}])
    files[2] = [{**r, "context_id": "c3"} for r in files[2]]
    rows = write(tmp_path, files)
    report = duckdb_report(tmp_path, Window())
    check(report, reference(rows, Window()))
    assert (report["routines"]["completed"], report["routines"]["open"]) == (2, 2)  # B's is open too, not idle
    assert report["routines"]["median_seconds"] == 60.0  # the one closed instance with a known duration
    assert report["routines"]["stale"] == 0  # the open one's last status has no time: not known to be idle


@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(files=datasets(), w=st.sampled_from(range(len(WINDOWS))))
def test_spark_report_equals_the_reference(
    tmp_path_factory: Any, spark: Any, files: list[list[dict[str, Any]]], w: int
) -> None:
    from converse_tap.analysis.spark import SparkEngine

    root = tmp_path_factory.mktemp("oracle")
    rows, window = write(root, files), WINDOWS[w]
    with SparkEngine.over_spark(root, window, spark=spark) as engine:
        report = build_report(engine, window, by=tuple(GROUPS), stale_after=pd.Timedelta(STALE))
    spk = json.loads(json.dumps(report, default=str))
    check(spk, reference(rows, window))
    assert spk == duckdb_report(root, window)  # and every other figure of the report too
