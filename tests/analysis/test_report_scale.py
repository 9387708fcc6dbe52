"""The report over datasets shaped by odd traffic or an attacker: times before 1970 and at the ends of the calendar,
and the routine window's plan (what it carries per row), each over a dataset's Parquet files (DuckDB)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from converse_tap.analysis.engine import Engine
from converse_tap.analysis.facts_sql import INSTANCES
from converse_tap.analysis.load import MESSAGE_COLUMNS
from converse_tap.analysis.report import build_report
from converse_tap.analysis.sources import _arrow
from converse_tap.store.schema import MESSAGES, with_version
from tests.analysis.frames import covered, messages, routine, sighting

# what a recorder always writes, and the facts do not read
_WRITTEN = {"location": "result.message", "object_kind": "message", "agent_url": "http://a/", "binding": "jsonrpc"}
_WRITTEN |= {"dialect": "v1.0", "method": "SendMessage"}


def write_messages(root: Path, rows: list[dict[str, Any]], times_us: list[int] | None = None) -> Path:
    """The rows (tests.analysis.frames.sighting) as the dataset's messages file; `times_us`: their times instead,
    in microseconds since 1970 (any a Parquet file can hold)."""
    frame = messages(*rows)
    table = _arrow(frame, "messages", MESSAGE_COLUMNS)
    if times_us is not None:
        table = table.set_column(
            table.schema.get_field_index("ts"), "ts", pa.array(times_us, table.schema.field("ts").type)
        )
    n = len(frame)
    columns = {f.name: table[f.name] if f.name in table.column_names else None for f in MESSAGES}
    arrays = []
    for f in MESSAGES:
        plain = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        given = columns[f.name]
        arrays.append(given if given is not None else pa.array([_WRITTEN.get(f.name)] * n, plain))
    out = pa.Table.from_arrays(arrays, names=MESSAGES.names).cast(MESSAGES)
    folder = root / "messages" / "date=2026-11-18"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(out.replace_schema_metadata(with_version(MESSAGES).metadata), folder / "part-0.parquet")
    return root


def report(root: Path, **kwargs: Any) -> dict[str, Any]:
    with Engine.over_dataset(root) as engine:
        return json.loads(json.dumps(build_report(engine, **kwargs), default=str))


def at(text: str, **fields: Any) -> dict[str, Any]:
    return {"ts": pd.Timestamp(text), **fields}


def test_times_before_1970_order_the_sightings(tmp_path: Path) -> None:
    """A time before 1970 is a negative number of microseconds: the sort key that orders the sightings takes it
    (DuckDB refused to shift it left, and the report failed), in time order before the position."""
    rows = [
        # written first, seen last: the file's order is not the time's
        sighting("m1", agent="a", **at("1969-12-31T23:59:58Z", **covered("partial"), ownership_state="human_owned")),
        sighting("m1", agent="a", **at("1969-12-31T23:59:59Z", **covered("answered"), ownership_state="human_owned")),
        sighting("m2", agent="a", **at("1969-12-31T23:59:57Z", **covered("unclear"), ownership_state="ai_owned")),
        sighting("m3", agent="a", **at("1970-01-01T00:00:01Z", **covered("answered"), ownership_state="ai_owned")),
    ]
    rep = report(write_messages(tmp_path, rows), by=("day",))
    assert rep["dataset"]["replies"] == 3
    assert rep["dataset"]["first_seen"] == "1969-12-31T23:59:57+00:00"
    counts = {k: v["count"] for k, v in rep["coverage"]["by_coverage"].items()}
    assert counts == {"answered": 2, "partial": 0, "unanswered": 0, "unclear": 1}  # m1's last sighting
    # in time order m2 (agent), m1 (human), m3 (agent): one hand-off, one hand-back
    assert (rep["authors"]["handoffs_to_human"], rep["authors"]["handbacks_to_agent"]) == (1, 1)
    assert sorted(rep["groups"]["day"]) == ["1969-12-31", "1970-01-01"]


def test_the_ends_of_the_calendar(tmp_path: Path) -> None:
    """Sightings in the years 1 and 9999: the last reply's time, from which idle instances are stale, is taken in
    microseconds (in nanoseconds it overflowed pandas, a traceback), and so is the idle time (in nanoseconds, the
    idle time of 9998 years overflowed a BIGINT); a duration of 9998 years is exact."""
    rows = [
        sighting("m1", conv="c1", **at("0001-01-01T00:00:00Z", **routine("R", "active"))),
        sighting("m2", conv="c1", **at("9999-12-31T23:59:59Z", **routine("R", "completed"))),
        sighting("m3", conv="c2", **at("0001-01-01T00:00:00Z", **routine("R", "waiting_for_input", "date"))),
    ]
    rep = report(write_messages(tmp_path, rows), by=("day", "routine"), stale_after=pd.Timedelta(days=1))
    routines = rep["routines"]
    assert (routines["instances"], routines["completed"], routines["open"], routines["stale"]) == (2, 1, 1, 1)
    assert routines["median_seconds"] == 315_537_897_599.0  # 0001-01-01 to 9999-12-31T23:59:59
    assert rep["dataset"]["last_seen"] == "9999-12-31T23:59:59+00:00"
    assert sorted(rep["groups"]["day"]) == ["0001-01-01", "9999-12-31"]


def test_stale_is_exact_to_the_microsecond(tmp_path: Path) -> None:
    """Idle time is compared in whole microseconds against the floor of the limit's: an instance idle exactly the
    limit is not stale, one a microsecond more is, whatever nanoseconds the limit has below a microsecond."""
    t0 = pd.Timestamp("2026-11-18T09:00:00Z")
    rows = [
        sighting("m1", conv="c1", ts=t0, **routine("R", "active")),
        sighting("m2", conv="c2", ts=t0 + pd.Timedelta(microseconds=1), **routine("R", "active")),
        sighting("m3", conv="c3", ts=t0 + pd.Timedelta(hours=1, microseconds=1)),
    ]
    root = write_messages(tmp_path, rows)
    for limit in (pd.Timedelta(hours=1), pd.Timedelta(hours=1) + pd.Timedelta(nanoseconds=500)):
        assert report(root, stale_after=limit)["routines"]["stale"] == 1, limit  # m1 only (idle 1 h + 1 µs)


def test_times_no_reader_can_hold_are_read_as_none(tmp_path: Path) -> None:
    """A file can hold times DuckDB reads but Python cannot (year 294247, BC): read as no time, so the report is
    made (it failed on the first of them it fetched), and says how many sightings had one."""
    rows = [
        sighting("m1", conv="c1", **covered("answered")),
        sighting("m2", conv="c1", **covered("partial")),
        sighting("m3", conv="c1", **covered("unclear")),
        sighting("m1", conv="c1", **covered("unanswered")),  # m1 polled in year 294247: its last sighting
    ]
    late, bc, ok = 9_223_372_036_854_775_000, -9_223_372_022_400_000_000, 1_795_000_000_000_000
    rep = report(write_messages(tmp_path, rows, [ok, late, bc, late + 1]), by=("day",))
    assert rep["dataset"]["replies"] == 3
    assert rep["dataset"]["first_seen"] == rep["dataset"]["last_seen"] == "2026-11-18T11:06:40+00:00"
    assert [n for n in rep["dataset"]["notes"] if "years 1 to 9999" in n] == [
        "agent message sightings with a time outside the years 1 to 9999 (no recorder's clock: files written by "
        "another tool?): 3, read as having none (ordered last, counted under the day (none))"
    ]
    assert {k: v["coverage"]["turns_with_coverage"] for k, v in rep["groups"]["day"].items()} == {
        "2026-11-18": 1,
        "(none)": 2,
    }
    counts = {k: v["count"] for k, v in rep["coverage"]["by_coverage"].items()}
    assert counts == {"answered": 0, "partial": 1, "unanswered": 1, "unclear": 1}


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [node, *(n for child in node.get("children", []) for n in _nodes(child))]


def test_the_routine_window_carries_no_slot_lists(tmp_path: Path) -> None:
    """The ordered window over a conversation's statuses sorts narrow rows: the slots lists (thousands per reply,
    from the wire) are not among what it reads, and only an abandoned instance's is joined back, by position."""
    rows = [
        sighting("m1", conv="c1", minute=0, **routine("R", "waiting_for_input", "date", "party")),
        sighting("m2", conv="c1", minute=1, **routine("R", "abandoned")),
        sighting("m3", conv="c1", minute=2, **routine("R", "waiting_for_input", "time")),
        sighting("m4", conv="c1", minute=3, **routine("R", "completed")),
    ]
    with Engine.over_dataset(write_messages(tmp_path, rows)) as engine:
        engine.build("replies")
        ((_, plan),) = engine.con.sql("EXPLAIN (FORMAT json) " + INSTANCES).fetchall()
        windows = [n for root in json.loads(plan) for n in _nodes(root) if n.get("name") == "WINDOW"]
        assert windows
        for window in windows:
            assert "pending_input" not in json.dumps(window)
        instances = engine.instances()
    assert instances["abandoned_at"].tolist() == [["date", "party"], None]
