"""What one reply's envelope may make its row hold: lists of citations and slots, and values a report groups by,
bounded where they are extracted (a report reads every row's: 300 replies naming a routine with 1 MB, or 1,000
replies of 5,000 citations each, were tiny Parquet files no report could read at its default memory limit)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from converse_tap.a2a.envelope import MAX_ITEMS
from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.a2a.wiretext import MAX_KEY
from converse_tap.addon.flows import exchange_from_flow
from tests.cli_helpers import invoke
from tests.factories import a2a_flow, agent_message, envelope, jsonrpc_result, write_dataset


def _reply(mid: str, **env: Any) -> Any:
    return a2a_flow(response=jsonrpc_result({"message": agent_message(mid, env=envelope(**env))}))


def _row(**env: Any) -> dict[str, Any]:
    ext = extract(exchange_from_flow(_reply("m-1", **env)), TextPolicy())
    assert ext is not None
    (row,) = [m for m in ext.messages if m["role"] == "agent"]
    return row


def test_citations_past_the_bound_are_counted_not_kept() -> None:
    cites = [{"documentId": f"d{i}", "title": f"T{i}", "sourceUrl": "https://docs.test/x"} for i in range(5_000)]
    row = _row(citations=cites)
    assert len(row["citations"]) == MAX_ITEMS and row["citations"][-1]["document_id"] == f"d{MAX_ITEMS - 1}"
    assert row["citation_count"] == 5_000
    assert f"citations_not_kept_past:{MAX_ITEMS}:5000" in row["anomalies"]


def test_slots_past_the_bound_are_counted_not_kept_and_every_required_one_counts() -> None:
    slots = [{"key": f"s{i}", "type": "string", "required": i % 2 == 0} for i in range(1_001)]
    row = _row(routine={"name": "book", "status": "waiting_for_input", "pendingInput": slots})
    assert len(row["pending_input"]) == MAX_ITEMS
    assert row["pending_required_open"] == 501
    assert f"pending_input_not_kept_past:{MAX_ITEMS}:1001" in row["anomalies"]


def test_long_names_and_ids_keep_their_beginning_and_stay_distinct() -> None:
    a, b = "r" * 1_000_000, "r" * 999_999 + "s"
    rows = [_row(routine={"name": n, "status": "active"}, citations=[{"documentId": n, "title": n}]) for n in (a, b)]
    names = [r["routine_name"] for r in rows]
    assert all(len(n) <= MAX_KEY and n.startswith("r" * 100) for n in names) and names[0] != names[1]
    docs = [r["citations"][0]["document_id"] for r in rows]
    assert all(len(d) <= MAX_KEY for d in docs) and docs[0] != docs[1]
    assert {"value_clipped:routine.name", "value_clipped:citations[].documentId"} <= set(rows[0]["anomalies"])
    assert len(rows[0]["citations"][0]["title"]) <= MAX_KEY


def test_a_report_over_replies_of_megabyte_names_reads_them_at_the_default_limit(tmp_path: Path) -> None:
    flows = [
        _reply(f"m{i}", routine={"name": f"{i:03}" + "n" * 1_000_000, "status": "completed"}, citations=[])
        for i in range(40)
    ]
    root = write_dataset(tmp_path / "d", flows)
    r = invoke("report", str(root), "--by", "routine", "--format", "json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert len(report["groups"]["routine"]) == 40  # each name its own routine, bounded and distinct
    assert all(len(k) <= MAX_KEY for k in report["groups"]["routine"])
