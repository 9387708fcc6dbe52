"""A record of a flow file cut short (a capture appended to after a crash, files concatenated, a copy that lost a
block) costs only itself: every whole record after it is read, wherever the cut falls.

Each test cuts one record at every byte (or at every byte of a stride) and reads the file. A cut can leave digits
that run into the next record's length prefix (`…2` + `2482:{…}` reads as one length of 22,482 bytes), and it can
leave the cut record's length claiming bytes that end, give or take a few, where a later record ends: neither may
cost a whole record. The records a cut record's body held before the cut may come back as records of their own
(nothing tells them from the file's), and are allowed; so are the records that the cut record's length covers when
it ends exactly where one of them ends (the framing says they are one record; mitmproxy reads them as one).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from converse_tap import flowfile
from tests.fuzz import flowfile_mutations as fm


def _record(i: int, fid: str, holds: int = 0) -> bytes:
    state = fm.http_state(i)
    state["id"] = fid
    if holds:  # a body holding whole records: an upload of a capture
        inner = b"".join(_record(i + k + 1, f"inner-{fid}-{k}") for k in range(holds))
        state["request"]["content"] = b"upload:" + inner + b":end"
    return fm.mitm_dumps(state)


def _read(path: Path) -> list[str]:
    ids: list[str] = []
    with contextlib.suppress(flowfile.Damaged):  # only at the end of a file: after every record it could read
        ids.extend(ex.id for ex in flowfile.read(path, skipped=lambda o, r: None))
    return ids


def _framed(records: list[bytes], k: int, after: int, claim: int) -> list[str]:
    """The records after a cut record k that its length prefix covers exactly when it ends where one of them ends:
    then the file's framing makes them one record (mitmproxy reads the same), and they may go with it."""
    at = after
    for j in range(k + 1, len(records)):
        at += len(records[j])
        if at == claim:
            return [f"r{i}" for i in range(k + 1, j + 1)]
    return []


def _cut_everywhere(tmp_path: Path, records: list[bytes], k: int, stride: int) -> None:
    """Record k cut at every `stride`-th byte: every other record of the file is read."""
    whole = [f"r{i}" for i in range(len(records)) if i != k]
    path = tmp_path / "cut.mitm"
    lost: dict[int, list[str]] = {}
    start = sum(len(r) for r in records[:k])
    for cut in range(1, len(records[k]), stride):
        path.write_bytes(b"".join(records[:k]) + records[k][:cut] + b"".join(records[k + 1 :]))
        ids = _read(path)
        framed = _framed(records, k, start + cut, start + len(records[k]))
        missing = [fid for fid in whole if fid not in ids and fid not in framed]
        if missing:
            lost[cut] = missing
        assert all(fid in whole or fid.startswith(f"inner-r{k}-") for fid in ids), (cut, ids)
    assert not lost, f"cuts of record {k} ({len(records[k])} bytes) that cost whole records: {lost}"


def test_a_record_cut_at_any_byte_costs_only_itself(tmp_path: Path) -> None:
    records = [_record(i, f"r{i}") for i in range(4)]
    _cut_everywhere(tmp_path, records, 1, 1)


@pytest.mark.parametrize(("k", "holds"), [(1, 1), (1, 2), (2, 1)], ids=["one-inside", "two-inside", "after-one"])
def test_a_record_holding_records_cut_at_any_byte_costs_only_itself(tmp_path: Path, k: int, holds: int) -> None:
    """The cut record's body holds whole records; and (`after-one`) a record holding one precedes the cut one."""
    records = [_record(i, f"r{i}", holds if i in (k, 1) else 0) for i in range(5)]
    _cut_everywhere(tmp_path, records, k, 3)


def test_records_no_migration_reads_cost_each_itself_once() -> None:
    """Whole records of a format no migration knows (a newer mitmproxy's) are skipped one by one, each once, and
    the readable ones between them read: the search for records chained to where such a record ends must never
    find the record itself (a reading that resumed there again would never end). In a child process killed after
    20 s."""
    from tests.children import finishes_within

    code = (
        "import tempfile\n"
        "from pathlib import Path\n"
        "from converse_tap import flowfile\n"
        "from tests.fuzz import flowfile_mutations as fm\n"
        "def rec(i, version):\n"
        "    s = fm.http_state(i)\n"
        "    s['id'], s['version'] = f'r{i}', version\n"
        "    return fm.mitm_dumps(s)\n"
        "records = [rec(i, 999 if i % 3 else 21) for i in range(9)]\n"
        "path = Path(tempfile.mkdtemp()) / 'x.mitm'\n"
        "starts = fm.write_records(path, records)\n"
        "skipped = []\n"
        "ids = [ex.id for ex in flowfile.read(path, skipped=lambda o, r: skipped.append(o))]\n"
        "assert ids == ['r0', 'r3', 'r6'], ids\n"
        "assert skipped == [s for i, s in enumerate(starts) if i % 3], (skipped, starts)\n"
        "print('done')\n"
    )
    finishes_within(code, 20, "reading records of an unknown format")
