import errno
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.store import writer as writer_module
from converse_tap.store.reader import load
from converse_tap.store.recovery import recover
from converse_tap.store.schema import METADATA_KEY, SCHEMA_VERSION
from converse_tap.store.writer import DatasetWriter
from tests.factories import a2a_flow, agent_message, jsonrpc_result


def extraction(i: int = 0, ts: float | None = None) -> Extraction:
    flow = a2a_flow(response=jsonrpc_result({"message": agent_message(f"m-{i}")}))
    if ts is not None:
        flow.request.timestamp_start = ts
        flow.response.timestamp_start = flow.response.timestamp_end = ts
    out = extract(exchange_from_flow(flow), TextPolicy())
    assert out is not None
    return out


def test_rows_are_journaled_then_rolled_into_parquet(tmp_path: Path) -> None:
    w = DatasetWriter(tmp_path, flush_interval=60)
    w.start()
    for i in range(5):
        w.submit(extraction(i))
    w.flush()
    journals = list(tmp_path.rglob("*.arrows"))
    assert {p.name.split("-")[0] for p in journals} == {"exchanges", "messages"}
    assert load(tmp_path, "exchanges").empty  # not Parquet yet, and readers skip journals
    w.close()
    assert len(load(tmp_path, "exchanges")) == 5 and len(load(tmp_path, "messages")) == 10
    assert not (tmp_path / "_journal" / w.id).exists()
    (f,) = tmp_path.glob("exchanges/date=*/part-*.parquet")
    assert pq.read_schema(f).metadata[METADATA_KEY] == str(SCHEMA_VERSION).encode()


def test_rollover_by_rows_and_partition_by_utc_date(tmp_path: Path) -> None:
    w = DatasetWriter(tmp_path, flush_interval=0.01, rollover_rows=4)
    w.start()
    day1, day2 = 1_795_000_000.0, 1_795_000_000.0 + 86_400
    for i in range(6):
        w.submit(extraction(i, ts=day1 if i < 3 else day2))
        w.flush()
    w.close()
    dates = sorted(p.name for p in (tmp_path / "exchanges").iterdir())
    assert dates == ["date=2026-11-18", "date=2026-11-19"]
    assert len(list(tmp_path.glob("exchanges/*/part-*.parquet"))) >= 3
    assert (
        sorted(load(tmp_path, "exchanges", columns=["exchange_id", "date"])["date"])
        == ["2026-11-18"] * 3 + ["2026-11-19"] * 3
    )


KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    from converse_tap.store.writer import DatasetWriter
    from tests.store.test_writer import extraction
    w = DatasetWriter(sys.argv[1], flush_interval=60)
    w.start()
    for i in range(7):
        w.submit(extraction(i))
    w.flush()
    print("flushed", flush=True)
    time.sleep(60)
    """
)


def _killed_writer(root: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(root)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    ) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "flushed"
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_journals_of_a_killed_writer_are_recovered(tmp_path: Path) -> None:
    _killed_writer(tmp_path)
    assert list(tmp_path.rglob("*.arrows"))
    assert recover(tmp_path) == {"exchanges": 7, "messages": 14, "agent_cards": 0, "capture_gaps": 0}
    assert len(load(tmp_path, "exchanges")) == 7
    assert not list(tmp_path.rglob("*.arrows")) and not list((tmp_path / "_journal").iterdir())


def test_torn_journal_tail_keeps_complete_batches(tmp_path: Path) -> None:
    w = DatasetWriter(tmp_path, flush_interval=60)
    w.start()
    w.submit(extraction(1))
    w.flush()
    w.submit(extraction(2))
    w.flush()
    (journal,) = tmp_path.rglob("exchanges-*.arrows")
    size = journal.stat().st_size
    # simulate a crash: the process dies with its lock released and half a batch on disk
    os.close(w._lock_fd)
    w._lock_fd = None
    with open(journal, "r+b") as f:
        f.truncate(size - 100)
    assert recover(tmp_path)["exchanges"] == 1
    assert load(tmp_path, "exchanges")["exchange_id"].nunique() == 1


def test_a_live_writers_journal_is_left_alone(tmp_path: Path) -> None:
    w = DatasetWriter(tmp_path, flush_interval=60)
    w.start()
    w.submit(extraction())
    w.flush()
    assert recover(tmp_path) == {"exchanges": 0, "messages": 0, "agent_cards": 0, "capture_gaps": 0}
    w.close()
    assert len(load(tmp_path, "exchanges")) == 1


def test_many_writers_share_one_dataset(tmp_path: Path) -> None:
    writers = [DatasetWriter(tmp_path, flush_interval=0.01, rollover_rows=3) for _ in range(3)]
    for w in writers:
        w.start()
    for i in range(30):
        writers[i % 3].submit(extraction(i))
    for w in writers:
        w.close()
    ids = load(tmp_path, "messages")["message_id"]
    assert sorted(ids[ids != "m-user"].tolist()) == sorted(f"m-{i}" for i in range(30))
    assert load(tmp_path, "exchanges")["exchange_id"].is_unique


def test_disk_failure_holds_rows_and_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    real_append = writer_module._Journal.append
    failing = {"on": True}

    def append(self, batch):
        if failing["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(self, batch)

    monkeypatch.setattr(writer_module._Journal, "append", append)
    w = DatasetWriter(tmp_path, flush_interval=0.01)
    w.start()
    for i in range(4):
        w.submit(extraction(i))
        w.flush()
    assert sum("No space left" in r.message for r in caplog.records) == 1  # loud, once
    assert w.stats.rows_written["exchanges"] == 0
    failing["on"] = False
    w.flush()
    w.close()
    assert len(load(tmp_path, "exchanges")) == 4 and w.stats.rows_dropped == 0


def test_a_full_disk_leaves_no_journal_file_per_retry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each retry on a full disk opened a new journal that failed before holding a row: a recorder left 211 torn
    files in one run (each then read as "ends mid-batch"). A journal that holds no row is removed when it fails; the
    one that was live when the disk filled keeps its complete batches."""
    real_append = writer_module._Journal.append
    failing = {"on": False}

    def append(self, batch):
        if failing["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(self, batch)

    monkeypatch.setattr(writer_module._Journal, "append", append)
    extractions = [extraction(i) for i in range(30)]
    w = DatasetWriter(tmp_path, flush_interval=60)
    w.start()
    w.submit(extractions[0])
    w.flush()  # the journals live when the disk fills: one per table, holding rows
    failing["on"] = True
    for ext in extractions[1:]:
        w.submit(ext)
        w.flush()
    assert w.stats.flush_failures >= 29
    held = sorted(p.name for p in w.dir.glob("*.arrows"))
    assert held == ["exchanges-000001.arrows", "messages-000002.arrows"], held  # no file per retry
    failing["on"] = False
    w.flush()
    w.close()
    assert sorted(load(tmp_path, "exchanges")["exchange_id"]) == sorted(e.exchange["exchange_id"] for e in extractions)


def test_bounded_buffer_counts_what_it_drops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def append(self, batch):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(writer_module._Journal, "append", append)
    w = DatasetWriter(tmp_path, flush_interval=0.01, max_pending_rows=9)
    w.start()
    for i in range(10):
        w.submit(extraction(i))
    w.flush()
    w.close()
    assert w.stats.rows_dropped == 30  # 10 exchanges + 20 messages, every one counted


def test_a_dataset_directory_removed_mid_run_is_counted_not_silent(tmp_path: Path, caplog) -> None:
    import shutil

    root = tmp_path / "data"
    w = DatasetWriter(root, flush_interval=60)
    w.start()
    for i in range(3):
        w.submit(extraction(i))
    w.flush()
    shutil.rmtree(root)
    w.submit(extraction(99))  # after the loss, recording goes on into a recreated directory
    w.close()
    assert w.stats.rows_dropped == 9  # 3 exchanges + 6 messages journaled into the removed directory
    assert "vanished with 3 journaled exchanges rows" in caplog.text
    assert load(root, "messages")["message_id"].tolist() == ["m-user", "m-99"]


def test_rows_to_batch_is_from_pylist(tmp_path: Path) -> None:
    """The writer's row building gives the batches pyarrow's own `from_pylist` gives, for every table, over the
    rows of a generated capture and the golden flows; a row it cannot store fails both ways."""
    import pyarrow as pa

    from converse_tap import flowfile
    from converse_tap.addon.flows import exchange_from_flow
    from converse_tap.store.batches import TS_COLUMNS, UNSTORABLE, rows_to_batch, to_micros
    from converse_tap.store.gaps import CaptureGap
    from converse_tap.store.schema import TABLES
    from tests.captures import write_capture
    from tests.golden.sample import sample_flows

    exchanges = [*flowfile.read(write_capture(tmp_path / "c.mitm", 400)), *map(exchange_from_flow, sample_flows())]
    exts = [e for e in (extract(x, TextPolicy()) for x in exchanges) if e is not None]
    rows = {"exchanges": [e.exchange for e in exts], "messages": [m for e in exts for m in e.messages]}
    rows["agent_cards"] = [c for e in exts for c in e.agent_cards]
    rows["capture_gaps"] = [CaptureGap("recorder_backlog_full", i, i * 100, 1.0 + i, 2.0 + i).row() for i in range(20)]
    for table, schema in TABLES.items():
        to_micros(rows[table], TS_COLUMNS[table])
        assert len(rows[table]) > 10, table
        fast = rows_to_batch(rows[table], schema)
        assert fast.equals(pa.RecordBatch.from_pylist(rows[table], schema=schema)), table
        assert fast.schema.equals(schema, check_metadata=True)
        short = [{k: v for k, v in r.items() if k != "agent_id"} for r in rows[table][:5]]  # a key missing: null
        assert rows_to_batch(short, schema).equals(pa.RecordBatch.from_pylist(short, schema=schema))
        assert rows_to_batch([], schema).equals(pa.RecordBatch.from_pylist([], schema=schema))
    bad = [dict(rows["exchanges"][0], status_code="200")]
    with pytest.raises(UNSTORABLE):
        pa.RecordBatch.from_pylist(bad, schema=TABLES["exchanges"])
    with pytest.raises(UNSTORABLE):
        rows_to_batch(bad, TABLES["exchanges"])


def test_one_unstorable_value_costs_its_own_row_not_a_row_by_row_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch that does not build was tried again row by row: one lone surrogate in a flush of 4,096 rows made
    4,096 one-row batches (ten times the batch's cost), and a value like it in every flush kept the worker that far
    behind. The batch is halved until the bad row stands alone: about 2·log2(n) batches, the rows and their order
    as before."""
    import math

    from converse_tap.store import batches
    from converse_tap.store.batches import TS_COLUMNS, mend_rows, to_micros
    from converse_tap.store.schema import TABLES

    ext = extract(exchange_from_flow(a2a_flow(response=jsonrpc_result({"message": agent_message()}))), TextPolicy())
    assert ext is not None
    to_micros(ext.messages, TS_COLUMNS["messages"])
    n = 4096
    rows = [dict(ext.messages[1], seq=i) for i in range(n)]
    rows[1234] = dict(rows[1234], text="bad \ud800 text")
    built = []
    real = batches.rows_to_batch

    def counted(rs, schema):  # the real conversion, counted
        built.append(len(rs))
        return real(rs, schema)

    monkeypatch.setattr(batches, "rows_to_batch", counted)
    kept = mend_rows(rows, TABLES["messages"])
    assert [r["seq"] for r in kept] == list(range(n))
    assert kept[1234]["text"] == "bad \\ud800 text" and "unstorable_value:text" in kept[1234]["anomalies"]
    assert kept[1233] is rows[1233]  # the others untouched
    assert len(built) <= 2 * math.log2(n) + 4, len(built)
