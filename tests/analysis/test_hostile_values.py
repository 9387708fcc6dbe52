"""Valid Parquet files of the dataset's schema whose values no writer of ours makes (a tampered or foreign-made
file): a tool input schema that is not JSON, rows whose every column but the id is null, timestamps at the limits
of their type. Each bad value costs only its own row: every command and format still answers, exit 0."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli_helpers import invoke


def _tamper(root: Path, table: str, change: Callable[[pa.Table], pa.Table], name: str = "tampered") -> None:
    """A second file beside the table's file: its rows under new exchange ids, changed by `change`."""
    good = next((root / table).glob("date=*/*.parquet"))
    t = pq.read_table(good)
    t = t.drop_columns([c for c in ("date",) if c in t.column_names])
    ids = pa.array([f"{name}-{x}" for x in t["exchange_id"].to_pylist()], pa.string())
    t = t.set_column(t.schema.get_field_index("exchange_id"), t.schema.field("exchange_id"), ids)
    pq.write_table(change(t), good.parent / f"part-{name}.parquet")


def _not_json_schemas(t: pa.Table) -> pa.Table:
    field = t.schema.field("tools")
    tools = [
        [{**tool, "input_schema_json": "{not json"} for tool in (ts or [])]
        + [{"tool_name": "t", "description": None, "input_schema_json": "[1,2", "required_fields": ["a"]}]
        for ts in t["tools"].to_pylist()
    ]
    t = t.set_column(t.schema.get_field_index("tools"), field, pa.array(tools, field.type))
    agent = t.schema.field("agent")
    return t.set_column(t.schema.get_field_index("agent"), agent, pa.array(["tampered.agent"] * len(t), agent.type))


def _all_null(t: pa.Table) -> pa.Table:
    for f in t.schema:
        if f.name != "exchange_id":  # declared non-nullable by our schema or not: another writer may not care
            t = t.set_column(t.schema.get_field_index(f.name), f.with_nullable(True), pa.nulls(len(t), f.type))
    return t


def _json(r: object) -> object:
    def strict(token: str) -> None:
        raise AssertionError(f"{token} is not JSON")

    return json.loads(r.stdout, parse_constant=strict)  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def tampered(sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tampered") / "data"
    shutil.copytree(sample, root)
    _tamper(root, "agent_cards", _not_json_schemas)
    _tamper(root, "exchanges", _all_null)
    _tamper(root, "messages", _all_null)
    _tamper(root, "agent_cards", _all_null, "nulls")
    return root


@pytest.mark.parametrize(
    "args",
    [
        ["report"],
        ["report", "--format", "json"],
        ["report", "--format", "markdown", "--by", "agent"],
        ["report", "--format", "html", "--by", "routine"],
        ["agents"],
        ["agents", "--format", "json"],
        ["check", "--no-anomalies", "--per-agent"],
    ],
)
def test_every_command_answers_over_bad_values(tampered: Path, args: list[str]) -> None:
    r = invoke(args[0], str(tampered), *args[1:])
    assert r.exit_code in (0, 1), r.stderr  # check may fail a threshold; nothing stops with a traceback
    if "json" in args:
        _json(r)


def test_a_tool_schema_that_is_not_json_is_shown_as_the_text_it_is(tampered: Path) -> None:
    agents = _json(invoke("agents", str(tampered), "--format", "json"))
    schemas = [t["input_schema"] for a in agents for c in a["cards"] for t in c["tools"]]  # type: ignore[union-attr]
    assert "[1,2" in schemas and "{not json" in schemas
    assert any(isinstance(s, dict) for s in schemas)  # the sample's own schemas still parsed


def test_a_card_without_an_agent_is_listed_with_a_null_agent(tampered: Path) -> None:
    report = _json(invoke("report", str(tampered), "--format", "json"))
    cards = report["conformance"]["agent_cards"]  # type: ignore[index]
    assert None in [c["agent"] for c in cards] and any(c["agent"] for c in cards)


def _limits(t: pa.Table) -> pa.Table:
    """Message times at both ends of the timestamp type (DuckDB reads them as infinity and -infinity)."""
    ts = t.schema.field("ts")
    raw = pa.array([2**63 - 1 if i % 2 else -(2**63 - 1) for i in range(len(t))], pa.int64())
    return t.set_column(t.schema.get_field_index("ts"), ts, raw.cast(ts.type))


@pytest.fixture(scope="module")
def limits(sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("limits") / "data"
    shutil.copytree(sample, root)
    _tamper(root, "messages", _limits)
    return root


def test_times_at_the_limits_of_their_type_cost_only_their_rows(limits: Path) -> None:
    conversations = _json(invoke("sql", str(limits), "SELECT conversation FROM conversations", "--format", "json"))
    assert conversations
    for row in conversations:  # type: ignore[attr-defined]
        r = invoke("show", str(limits), row["conversation"])
        assert r.exit_code == 0 and "[" in r.stdout
        assert _json(invoke("show", str(limits), row["conversation"], "--format", "json"))
    r = invoke("report", str(limits), "--format", "html", "--by", "routine")
    assert r.exit_code == 0 and "</html>" in r.stdout
    r = invoke("sql", str(limits), "SELECT ts FROM messages ORDER BY ts NULLS LAST", "--format", "json")
    assert {"infinity", "-infinity"} <= {row["ts"] for row in _json(r)}  # type: ignore[attr-defined]
