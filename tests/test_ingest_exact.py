"""Fast ingest (the fast reader, batches, parallel shares) gives exactly the rows of the reference path:
every record parsed whole by mitmproxy's tnetstring reader, migrated, read by exchange_from_state, extracted and
written by one writer."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from mitmproxy import io
from mitmproxy.io import compat, tnetstring

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_state
from converse_tap.ingest import ingest
from converse_tap.store.reader import load
from converse_tap.store.writer import DatasetWriter
from tests.addon.test_flows import _connect_flow, _error_flow, _gzip_flow, _ipv6_https_flow
from tests.captures import write_capture
from tests.golden.sample import sample_flows

KEYS = {"exchanges": ["exchange_id"], "messages": ["exchange_id", "seq"], "agent_cards": ["exchange_id"]}


def reference_ingest(path: Path, out: Path, policy: TextPolicy) -> int:
    """Today's path, record by record: the rows fast ingest must reproduce."""
    writer = DatasetWriter(out, flush_interval=3600, rollover_rows=10**9, rollover_seconds=10**9)
    writer.start(thread=False)
    n = 0
    with open(path, "rb") as f:
        while True:
            try:
                state = tnetstring.load(f)
            except ValueError:
                break
            state = compat.migrate_flow(state)  # type: ignore[arg-type]
            if state.get("type") != "http":
                continue
            ext = extract(exchange_from_state(state), policy)  # type: ignore[arg-type]
            if ext is not None:
                writer.write(ext)
                n += 1
    writer.close()
    return n


def _frame(root: Path, table: str) -> pd.DataFrame:
    df = load(root, table)
    return df.drop(columns=["date"]).sort_values(KEYS[table]).reset_index(drop=True)


def _assert_same(a: Path, b: Path) -> None:
    for table in KEYS:
        fa, fb = _frame(a, table), _frame(b, table)
        assert len(fa) == len(fb), table
        pd.testing.assert_frame_equal(fa, fb, check_categorical=False, obj=table)


def test_golden_flows_read_as_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "golden.mitm"
    flows = [*sample_flows(), _gzip_flow(), _error_flow(), _ipv6_https_flow(), _connect_flow()]
    with open(path, "wb") as f:
        w = io.FlowWriter(f)
        for flow in flows:
            w.add(flow)
    n = reference_ingest(path, tmp_path / "ref", TextPolicy())
    result = ingest([path], tmp_path / "fast", TextPolicy())
    assert (result.exchanges, result.errors) == (n, []) and n >= len(sample_flows())
    _assert_same(tmp_path / "ref", tmp_path / "fast")


@pytest.mark.parametrize("jobs", [1, 2])
def test_generated_capture_reads_as_the_reference(tmp_path: Path, jobs: int) -> None:
    path = write_capture(tmp_path / "capture.mitm", 1500)
    n = reference_ingest(path, tmp_path / "ref", TextPolicy())
    result = ingest([path], tmp_path / "fast", TextPolicy(), jobs=jobs, part_bytes=path.stat().st_size // 3)
    assert (result.flows, result.exchanges, result.duplicates, result.errors) == (1500, n, 0, [])
    assert n > 1300  # nearly all of the capture is A2A
    _assert_same(tmp_path / "ref", tmp_path / "fast")
    if jobs > 1:  # one writer per process: each table in at most one file per process and date
        files = list((tmp_path / "fast" / "messages").rglob("*.parquet"))
        dates = {p.parent.name for p in files}
        assert len(dates) <= len(files) <= 2 * len(dates)
