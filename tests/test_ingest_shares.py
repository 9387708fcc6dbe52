"""How a parallel ingest shares its input: shares that end near their due (the first, read in the ingest's own
process while the workers start up, larger by a set amount), one part per file per share, and Ctrl-C sent to the
ingest's process alone stopping every share."""

from __future__ import annotations

import itertools
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mitmproxy.io import tnetstring

from converse_tap.a2a.redact import TextPolicy
from converse_tap.ingest import ingest
from converse_tap.ingest_plan import SHARE_CUTS, plan, split_flow_file
from converse_tap.store.reader import load
from tests.captures import write_capture


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_capture(tmp_path_factory.mktemp("capture") / "capture.mitm", 3000)


def _record_sizes(path: Path) -> list[int]:
    return [p.size() for p in split_flow_file(path, 1)]


@pytest.mark.parametrize("jobs", [2, 3])
def test_shares_end_at_the_record_nearest_their_due_and_the_first_is_larger_by_head(capture: Path, jobs: int) -> None:
    total, largest = capture.stat().st_size, max(_record_sizes(capture))
    head = total // 10
    groups = plan([capture], {capture: "flows"}, jobs, part_bytes=total // 8, head=head)
    assert len(groups) == jobs and all(len(g) == 1 for g in groups)  # one contiguous part per share
    parts = [g[0] for g in groups]
    assert parts[0].start == 0 and parts[-1].end is None
    assert all(a.end == b.start for a, b in itertools.pairwise(parts))
    other = (total - head) / jobs
    dues = [other + head] + [other] * (jobs - 1)
    near = other / SHARE_CUTS + largest  # the plan cuts a share's worth into SHARE_CUTS pieces, at records
    assert all(abs(p.size() - due) <= near for p, due in zip(parts, dues, strict=True)), (
        [p.size() for p in parts],
        dues,
    )
    starts = [r.start for r in split_flow_file(capture, 1)]
    assert [p.before for p in parts] == [starts.index(p.start) for p in parts]  # flows ahead, for the messages


def test_a_head_start_larger_than_a_share_leaves_every_process_some_input(capture: Path) -> None:
    total = capture.stat().st_size
    groups = plan([capture], {capture: "flows"}, 2, part_bytes=total // 8, head=total)
    first, second = (g[0].size() for g in groups)  # the head start: at most one share's worth of the input
    assert len(groups) == 2 and abs(first - 3 * second) <= total / 2 / SHARE_CUTS * 4 + max(_record_sizes(capture)) * 4


def test_the_shares_give_the_rows_of_one_process_with_a_duplicate_across_them(tmp_path: Path, capture: Path) -> None:
    data = capture.read_bytes()
    first = tnetstring.loads(data[: split_flow_file(capture, 1)[0].size()])
    assert isinstance(first, dict)
    twice = tmp_path / "twice.mitm"
    twice.write_bytes(data + tnetstring.dumps(first))  # the first flow again, in the last share
    one = ingest([twice], tmp_path / "one", TextPolicy())
    two = ingest([twice], tmp_path / "two", TextPolicy(), jobs=2, part_bytes=len(data) // 8)
    assert (two.flows, two.exchanges, two.duplicates) == (one.flows, one.exchanges, one.duplicates)
    assert one.duplicates == 1 and not two.errors
    for table, key in (("exchanges", ["exchange_id"]), ("messages", ["exchange_id", "seq"])):
        a, b = (load(tmp_path / d, table).sort_values(key).reset_index(drop=True) for d in ("one", "two"))
        assert len(a) > 1000 and a.equals(b), table


def _id(path: Path, start: int, end: int | None) -> str:
    with open(path, "rb") as f:
        f.seek(start)
        state = tnetstring.loads(f.read(end - start if end is not None else -1))
    assert isinstance(state, dict)
    return str(state["id"])


_INTERRUPTIBLE = """
import json, sys
from pathlib import Path
from converse_tap.a2a.redact import TextPolicy
from converse_tap.ingest import ingest

def shown(done, total, flows):
    print(flows, flush=True)

capture, out, part = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
r = ingest([capture], out, TextPolicy(), jobs=2, part_bytes=part, progress=shown)
print(json.dumps({"interrupted": r.interrupted, "exchanges": r.exchanges, "errors": [str(e) for e in r.errors]}))
"""


def test_ctrl_c_sent_to_the_ingest_process_alone_stops_its_workers_too(tmp_path: Path, capture: Path) -> None:
    """The terminal's Ctrl-C reaches every process of the group; a SIGINT sent to the ingest's own process (`kill
    -INT`, a supervisor) reaches it alone, and it tells its workers: every share stops between two exchanges."""
    out = tmp_path / "out"
    part = capture.stat().st_size // 8
    args = [sys.executable, "-c", _INTERRUPTIBLE, str(capture), str(out), str(part)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the first progress: this process has read its first exchanges
    assert line.strip().isdigit(), line + proc.communicate(timeout=120)[1]
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result = json.loads(rest.strip().splitlines()[-1])
    assert result["interrupted"] and not result["errors"], result
    assert not any((out / "_journal").rglob("*.arrows"))  # what was read is in Parquet
    got = set(load(out, "exchanges")["exchange_id"])
    whole = ingest([capture], tmp_path / "whole", TextPolicy())
    every = set(load(tmp_path / "whole", "exchanges")["exchange_id"])
    (_, (worker,)) = plan([capture], {capture: "flows"}, 2, part_bytes=part, head=part // 2)
    theirs = {_id(capture, r.start, r.end) for r in split_flow_file(capture, 1) if r.start >= worker.start}
    assert 0 < len(got) < len(every) and theirs & every - got  # the worker's share stopped too, unfinished
    again = ingest([capture], out, TextPolicy(), jobs=2, part_bytes=part)
    assert again.duplicates == len(got) and not again.errors
    assert set(load(out, "exchanges")["exchange_id"]) == every and whole.exchanges == len(got) + again.exchanges
