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


def _striped_har(tmp_path: Path, n: int) -> tuple[Path, list]:
    """The generated capture as mitmproxy's HAR export, with what a single process and stripes must agree on:
    entries repeated near and far (duplicates across stripes and within one), an entry that is no exchange and
    one that cannot be parsed."""
    import json

    from mitmproxy.addons.savehar import SaveHar

    capture = write_capture(tmp_path / "capture.mitm", n)
    with capture.open("rb") as f:
        flows = [flow for flow in io.FlowReader(f).stream() if flow.type == "http"]
    entries = SaveHar().make_har(flows)["log"]["entries"]  # type: ignore[arg-type]
    entries.insert(4, entries[3])  # repeats read by the other stripe (i % 2 differs) and by the same one
    entries.insert(10, entries[7])
    entries.insert(11, entries[9])
    entries.insert(20, {"request": "not an entry"})
    texts = [json.dumps(e) for e in entries]
    texts.insert(30, "1" * 5000)  # valid JSON the parser refuses: unreadable, costs only itself
    path = tmp_path / "capture.har"
    path.write_text('{"log": {"version": "1.2", "entries": [' + ",\n".join(texts) + "]}}")
    return path, entries


def _striped(path: Path) -> None:
    from converse_tap import ingest_plan

    groups = ingest_plan.plan([path], {path: "har"}, 2, part_bytes=1024)
    assert [[(p.stripe, p.stripes) for p in g] for g in groups] == [[(0, 2)], [(1, 2)]]


def test_a_har_read_in_stripes_gives_the_rows_of_one_process(tmp_path: Path) -> None:
    path, _ = _striped_har(tmp_path, 400)
    _striped(path)
    one = ingest([path], tmp_path / "one", TextPolicy(), jobs=1)
    two = ingest([path], tmp_path / "two", TextPolicy(), jobs=2, part_bytes=1024)
    counts = ("flows", "exchanges", "duplicates", "skipped")
    assert [getattr(two, c) for c in counts] == [getattr(one, c) for c in counts]
    assert one.duplicates == 3 and one.skipped == 2 and one.exchanges > 300
    assert sorted(map(str, two.errors)) == sorted(map(str, one.errors))
    _assert_same(tmp_path / "one", tmp_path / "two")
    again = ingest([path], tmp_path / "two", TextPolicy(), jobs=2, part_bytes=1024)  # all there already
    once_more = ingest([path], tmp_path / "one", TextPolicy(), jobs=1)
    assert (again.exchanges, again.duplicates) == (0, once_more.duplicates) and once_more.duplicates > 300


def test_a_striped_har_that_stops_making_sense_is_reported_once(tmp_path: Path) -> None:
    path, _ = _striped_har(tmp_path, 120)
    text = path.read_text()
    path.write_text(text[: int(len(text) * 0.8)])  # cut inside an entry
    _striped(path)
    one = ingest([path], tmp_path / "one", TextPolicy(), jobs=1)
    two = ingest([path], tmp_path / "two", TextPolicy(), jobs=2, part_bytes=1024)
    assert len(one.errors) == 3 and "invalid JSON" in str(one.errors[-1])  # two bad entries, then the cut
    assert sorted(map(str, two.errors)) == sorted(map(str, one.errors))
    assert (two.flows, two.exchanges, two.duplicates) == (one.flows, one.exchanges, one.duplicates)
    _assert_same(tmp_path / "one", tmp_path / "two")
