"""`converse-tap export otlp` over a dataset that changes while it is read (a file removed, renamed, cut short or
overwritten between the listing and the reading, or between two reads of messages): the file is named with what
to do, exit 2, no traceback; one change is read past, as `report` does, each exchange sent once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from converse_tap.export import backfill
from converse_tap.export.backfill import dataset_spans
from converse_tap.store.changes import DatasetChanged
from tests.cli_helpers import invoke
from tests.export.collector import Collector
from tests.store.test_dataset_hunt import CHANGES, HOW, _dataset, _racing, _rename, _truncate


def _export(root: Path, col: Collector) -> Any:
    return invoke("export", "otlp", str(root), "--endpoint", col.url)


def _moving_while_spans_are_built(monkeypatch: pytest.MonkeyPatch, root: Path, every: bool) -> list[str]:
    """Two exchanges a read of messages; a messages file renamed as the first span is built (or as each is): a
    file changed after some spans were sent, before the next read."""
    monkeypatch.setattr(backfill, "CHUNK", 2)
    real = backfill.build_span
    moved: list[str] = []

    def build(*args: Any) -> Any:
        if every or not moved:
            first = sorted((root / "messages").glob("date=*/part-*.parquet"))[0]
            first.rename(first.with_name(f"part-moved-{len(moved)}.parquet"))
            moved.append(str(first))
        return real(*args)

    monkeypatch.setattr(backfill, "build_span", build)
    return moved


@pytest.mark.parametrize("how", sorted(CHANGES))
def test_a_file_changed_between_listing_and_reading_is_named(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _dataset(tmp_path / "data")
    hit: list[str] = []
    _racing(monkeypatch, backfill, CHANGES[how], hit)
    count, spans = dataset_spans(root)
    assert count == 6
    with pytest.raises(DatasetChanged) as e:
        list(spans)
    assert len(e.value.changed) == 1 and e.value.changed[0][0] == hit[0]
    assert e.value.changed[0][1].startswith(HOW[how]) and "run the command again" in str(e.value)


@pytest.mark.parametrize("change", [_rename, _truncate], ids=["renamed", "truncated"])
def test_an_export_reads_again_a_dataset_that_changed_once_under_it(
    change: Callable[[Path], None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Changed before any span was sent: the dataset is listed again and every exchange sent once; a file cut
    short is named as skipped, as `report` names it."""
    root = _dataset(tmp_path / "data")
    hit: list[str] = []
    _racing(monkeypatch, backfill, change, hit)
    with Collector() as col:
        r = _export(root, col)
    assert r.exit_code == 0 and hit, r.output
    assert "6 of 6 exchange spans accepted" in r.stderr
    sent = Counter(s.span_id.hex() for _res, s in col.spans())
    assert len(sent) == 6 and set(sent.values()) == {1}
    skipped = f"warning: skipped {hit[0]}: not a Parquet file"
    assert (skipped in r.stderr) == (change is _truncate) and r.stderr.count("warning") <= 1


def test_a_file_moved_after_spans_were_sent_sends_each_exchange_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export goes on from a new listing: the exchanges already sent are not sent again, the others are, with
    the messages of the moved file read under its new name."""
    root = _dataset(tmp_path / "data")
    moved = _moving_while_spans_are_built(monkeypatch, root, every=False)
    with Collector() as col:
        r = _export(root, col)
    assert r.exit_code == 0 and moved, r.output
    assert "6 of 6 exchange spans accepted" in r.stderr
    events = {s.span_id.hex(): len(s.events) for _res, s in col.spans()}
    assert len(col.spans()) == len(events) == 6
    _count, spans = dataset_spans(root)  # the dataset as it is now, read undisturbed
    assert events == {s.span_id: len(s.events) for s in spans}


def test_a_dataset_that_keeps_changing_under_an_export_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _dataset(tmp_path / "data")
    hit: list[str] = []
    n = iter(range(100))
    _racing(monkeypatch, backfill, lambda p: p.rename(p.with_name(f"part-moved-{next(n)}.parquet")), hit, every=True)
    with Collector() as col:
        r = _export(root, col)
    assert r.exit_code == 2 and len(hit) == 2, r.output
    assert f"{hit[-1]} is gone (removed or renamed)" in r.stderr and "run the command again" in r.stderr
    assert "accepted" not in r.stderr and not col.requests  # nothing was sent
    assert "Traceback" not in r.output and r.stdout == ""


def test_a_dataset_that_keeps_changing_after_spans_were_sent_says_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _dataset(tmp_path / "data")
    moved = _moving_while_spans_are_built(monkeypatch, root, every=True)
    with Collector() as col:
        r = _export(root, col)
    assert r.exit_code == 2, r.output
    assert f"{moved[-1]} is gone (removed or renamed)" in r.stderr and "changed while it was being read" in r.stderr
    sent = Counter(s.span_id.hex() for _res, s in col.spans())
    assert len(sent) == 4 and set(sent.values()) == {1}  # two reads of two exchanges each, none sent twice
    assert (
        "4 exchange spans were accepted by the collector before it stopped: running the command again sends them again"
        in r.stderr
    )
    assert "Traceback" not in r.output and r.stdout == ""
