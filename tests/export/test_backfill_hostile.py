"""`export otlp` over a dataset with values no writer of ours makes: rows whose every column but the id is null,
times at both ends of the timestamp type. Each costs only itself: every span is sent and accepted (before, one
such row stopped the export with a TypeError, or made the collector refuse every span of its batch)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from tests.analysis.test_hostile_values import _all_null, _limits, _tamper
from tests.cli_helpers import invoke
from tests.export.collector import Collector


def _start_at_limits(t: pa.Table) -> pa.Table:
    ts = t.schema.field("ts_start")
    raw = pa.array([2**63 - 1 if i % 2 else -(2**63 - 1) for i in range(len(t))], pa.int64())
    return t.set_column(t.schema.get_field_index("ts_start"), ts, raw.cast(ts.type))


def _malformed_urls(t: pa.Table) -> pa.Table:
    """Agent URLs the recorder keeps as written (flagged `url_malformed`) and urlsplit refuses."""
    bad = ["http://[::1/a2a" if i % 2 else "http://h:99999/a2a" for i in range(len(t))]
    return t.set_column(t.schema.get_field_index("agent_url"), t.schema.field("agent_url"), pa.array(bad, pa.string()))


@pytest.mark.parametrize("kind", ["nulls", "limits", "urls"])
def test_every_span_is_sent_and_accepted(sample: Path, tmp_path: Path, kind: str) -> None:
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    if kind == "nulls":
        _tamper(root, "exchanges", _all_null)
        _tamper(root, "messages", _all_null)
    elif kind == "limits":
        _tamper(root, "exchanges", _start_at_limits)
        _tamper(root, "messages", _limits)
    else:  # a ValueError from urlsplit stopped the export
        _tamper(root, "exchanges", _malformed_urls)
    with Collector() as collector:
        r = invoke("export", "otlp", str(root), "--endpoint", collector.url)
        assert r.exit_code == 0, r.stderr
        assert r.stderr.startswith("18 of 18 exchange spans accepted")
        spans = collector.spans()
    assert len(spans) == 18
    assert all(span.start_time_unix_nano <= span.end_time_unix_nano for _, span in spans)


def test_files_the_export_leaves_out_are_named(sample: Path, tmp_path: Path) -> None:
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    bad = next((root / "exchanges").glob("date=*")) / "evil.parquet"
    bad.write_bytes(b"not parquet")
    with Collector() as collector:
        r = invoke("export", "otlp", str(root), "--endpoint", collector.url)
    assert r.exit_code == 0 and f"warning: skipped {bad}: not a Parquet file" in r.stderr
    assert "9 of 9 exchange spans accepted" in r.stderr
