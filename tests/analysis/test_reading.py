"""What `report`, `check` and `agents` read: rows still in journals (of a running recorder and of one that died),
exchanges stored twice, and files dropped into a dataset that are not its own."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from converse_tap.store.schema import MESSAGES
from converse_tap.store.writer import DatasetWriter
from tests.cli_helpers import invoke
from tests.golden.sample import build_sample, sample_extractions
from tests.store.test_writer import _killed_writer

DAY = "date=1999-12-31"  # the sample's partition
AGENT = "agent.test:9000/a2a/jsonrpc"  # the sample's agent; its card is filed under agent.test:9000


def report(dataset: Path, *args: str) -> dict:
    r = invoke("report", str(dataset), "--format", "json", *args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def calls(agents_json: str) -> dict[str, int]:
    return {a["agent"]: a["calls"] for a in json.loads(agents_json)}


def headline(rep: dict) -> dict:
    """The sample's figures (tests/golden/report.txt): what must not move, however the rows were stored."""
    ds, conf = rep["dataset"], rep["conformance"]["adoption"]
    return {
        "exchanges": ds["exchanges"],
        "replies": ds["replies"],
        "turns": ds["turns"],
        "assessed": rep["coverage"]["turns_assessed"],
        "authors": rep["authors"]["by_author"],
        "abandonment": rep["routines"]["abandonment_rate"],
        "calls": (conf["requests_asking_converse"]["count"], conf["requests_asking_converse"]["of"]),
        "messages": (conf["agent_messages_with_envelope"]["count"], conf["agent_messages_with_envelope"]["of"]),
        "cards": len(rep["conformance"]["agent_cards"]),
    }


SAMPLE = {
    "exchanges": 9,
    "replies": 7,
    "turns": 6,
    "assessed": 3,
    "authors": {"agent": 6, "human": 1},
    "abandonment": 0.5,
    "calls": (8, 8),
    "messages": (7, 7),
    "cards": 1,
}


def test_the_sample_reads_as_documented(sample: Path) -> None:
    rep = report(sample)
    assert headline(rep) == SAMPLE
    assert rep["dataset"]["notes"] == []


def test_a_running_recorder_s_journaled_rows_are_reported(tmp_path: Path) -> None:
    writer = DatasetWriter(tmp_path, flush_interval=60, rollover_seconds=3600)
    writer.start()
    try:
        for ext in sample_extractions():
            writer.submit(ext)
        writer.flush()  # journaled, one interval passed; no Parquet file yet
        assert not list(tmp_path.rglob("*.parquet"))
        rep = report(tmp_path)
        assert headline(rep) == SAMPLE
        assert rep["dataset"]["notes"] == ["includes 26 rows journaled by a running recorder, not yet in Parquet files"]
        r = invoke("check", str(tmp_path), "--max-abandonment-rate", "0.5")
        assert r.exit_code == 0 and "abandonment_rate 50.0%" in r.stdout
        r = invoke("agents", str(tmp_path), "--format", "json")
        assert calls(r.stdout) == {"agent.test:9000": 0, AGENT: 8}
    finally:
        writer.close()
    rolled = report(tmp_path)
    assert headline(rolled) == SAMPLE and rolled["dataset"]["notes"] == []


def test_a_dead_recorder_s_journals_are_read_and_recover_is_named(tmp_path: Path) -> None:
    _killed_writer(tmp_path)  # 7 exchanges, 7 agent messages without the envelope, left in journals
    rep = report(tmp_path)
    assert rep["dataset"]["exchanges"] == 7
    assert rep["conformance"]["adoption"]["agent_messages_with_envelope"]["of"] == 7
    (note,) = rep["dataset"]["notes"][:1]
    assert "includes 21 rows from the journals of a recorder that stopped" in note
    assert f"run `converse-tap recover {tmp_path}`" in note
    r = invoke("agents", str(tmp_path))
    assert r.exit_code == 0 and "(7 A2A calls)" in r.stdout
    assert f"converse-tap recover {tmp_path}" in r.stderr
    assert invoke("recover", str(tmp_path)).exit_code == 0
    after = report(tmp_path)
    assert after["dataset"]["exchanges"] == 7 and not any("journal" in n for n in after["dataset"]["notes"])


def test_the_same_capture_stored_twice_counts_once(tmp_path: Path) -> None:
    build_sample(tmp_path)
    build_sample(tmp_path)  # re-ingested: every exchange and message twice, in other files
    assert len(list(tmp_path.glob("exchanges/*/*.parquet"))) == 2
    rep = report(tmp_path)
    assert headline(rep) == SAMPLE
    by_agent = report(tmp_path, "--by", "agent")["groups"]["agent"][AGENT]
    assert by_agent["authors"]["replies"] == 7
    r = invoke("agents", str(tmp_path), "--format", "json")
    assert calls(r.stdout) == {"agent.test:9000": 0, AGENT: 8}


def _drop_foreign_files(dataset: Path) -> list[Path]:
    folder = dataset / "messages" / DAY
    empty = folder / "part-empty.parquet"
    empty.write_bytes(b"")
    text = folder / "notes.txt"
    text.write_text("not a table")
    other = folder / "part-other.parquet"
    pq.write_table(pa.table({"city": ["Lyon"], "population": [522_000]}), other)
    wrong = folder / "part-wrong-types.parquet"
    fields = [pa.field(f.name, pa.string() if f.name in ("seq", "has_envelope") else f.type) for f in MESSAGES]
    row = {f.name: None for f in MESSAGES} | {"exchange_id": "x", "seq": "zero", "has_envelope": "yes"}
    pq.write_table(pa.Table.from_pylist([row], schema=pa.schema(fields)), wrong)
    return [empty, text, other, wrong]


def test_foreign_files_are_skipped_by_report_and_agents_and_refused_by_check(tmp_path: Path) -> None:
    build_sample(tmp_path)
    empty, text, other, wrong = _drop_foreign_files(tmp_path)
    r = invoke("report", str(tmp_path), "--format", "json")
    assert r.exit_code == 0
    rep = json.loads(r.stdout)
    assert headline(rep) == SAMPLE
    assert r.stderr.splitlines() == [  # in the order of their names
        f"warning: skipped {text}: not a Parquet file",
        f"warning: skipped {empty}: an empty file",
        f"warning: skipped {other}: Parquet of another schema (no exchange_id, ts, seq column)",
        f"warning: skipped {wrong}: wrong column types: seq is string, not int32; has_envelope is string, not bool",
    ]
    assert len([n for n in rep["dataset"]["notes"] if n.startswith("skipped ")]) == 4
    r = invoke("agents", str(tmp_path), "--format", "json")
    assert r.exit_code == 0 and calls(r.stdout) == {"agent.test:9000": 0, AGENT: 8}
    assert all(str(f) in r.stderr for f in (empty, text, other, wrong))
    r = invoke("check", str(tmp_path), "--max-abandonment-rate", "0.9")
    assert r.exit_code == 2 and r.stdout == ""
    assert all(str(f) in r.stderr for f in (empty, text, other, wrong))
    assert "not its own" in r.stderr


def test_a_damaged_file_of_the_dataset_costs_only_itself_and_is_named(tmp_path: Path) -> None:
    build_sample(tmp_path)
    (f,) = tmp_path.glob(f"messages/{DAY}/*.parquet")
    data = bytearray(f.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    data[4 : len(data) - footer] = bytes(len(data) - footer - 4)  # the pages zeroed, the footer intact
    f.write_bytes(bytes(data))
    r = invoke("report", str(tmp_path), "--format", "json")
    assert r.exit_code == 3  # written from the other files: exchanges and cards, no message left to measure
    assert f"warning: skipped {f}: damaged inside (" in r.stderr
    rep = json.loads(r.stdout)
    assert rep["dataset"]["exchanges"] == 9 and any(str(f) in n for n in rep["dataset"]["notes"])
    r = invoke("check", str(tmp_path), "--no-anomalies")  # a gate refuses what it cannot read whole
    assert r.exit_code == 2 and "damaged inside" in r.stderr
    # sql (a query that reads the pages, and one whose views need them) and show: the same, without the file
    r = invoke("sql", str(tmp_path), "SELECT count(text) AS n FROM messages", "--format", "csv")
    assert (r.exit_code, r.stdout) == (0, "n\n0\n") and f"warning: skipped {f}: damaged inside (" in r.stderr
    r = invoke("sql", str(tmp_path), "SELECT count(*) AS n FROM replies", "--format", "csv")
    assert (r.exit_code, r.stdout) == (0, "n\n0\n") and f"warning: skipped {f}: damaged inside (" in r.stderr
    r = invoke("show", str(tmp_path), "c1")
    assert r.exit_code == 2 and "no conversation 'c1'" in r.stderr and "damaged inside" in r.stderr


def test_replies_built_file_run_by_file_run_are_the_replies_built_at_once(tmp_path: Path) -> None:
    """Replies are joined to their last sighting one run of files at a time (`chunk_rows`); a message first seen
    in one file and last seen in another is one reply either way, with the same first sighting."""
    from converse_tap.analysis.engine import Engine
    from converse_tap.analysis.report import build_report

    build_sample(tmp_path)
    build_sample(tmp_path)  # every message sighted again, in a second file
    with Engine.over_dataset(tmp_path) as whole, Engine.over_dataset(tmp_path, chunk_rows=1) as parts:
        assert len(whole._chunks) == 0 and len(parts._chunks) == 2
        assert parts.replies().equals(whole.replies())
        assert build_report(parts, by=("agent", "day", "routine")) == build_report(
            whole, by=("agent", "day", "routine")
        )
    with Engine.over_dataset(tmp_path, chunk_rows=1) as parts:
        rep = build_report(parts)
    assert headline(rep) == SAMPLE


def test_message_keys_grouped_partition_by_partition_are_the_keys_grouped_at_once(tmp_path: Path) -> None:
    """Past `partition_rows` message rows, the message keys are grouped one hash partition at a time: the same
    keys, first and last sightings and adoption counts, so the same report."""
    from converse_tap.analysis.engine import Engine
    from converse_tap.analysis.report import build_report

    build_sample(tmp_path)
    build_sample(tmp_path)
    keys = "SELECT * FROM message_keys ORDER BY first_pos NULLS LAST, last_pos NULLS LAST, carried"
    with Engine.over_dataset(tmp_path) as whole, Engine.over_dataset(tmp_path, partition_rows=5) as parts:
        assert whole._partitions == 1 and parts._partitions > 3
        whole.build("message_keys")
        parts.build("message_keys")
        assert parts.con.sql(keys).fetchall() == whole.con.sql(keys).fetchall()
        assert build_report(parts, by=("agent", "day", "routine")) == build_report(
            whole, by=("agent", "day", "routine")
        )
    with Engine.over_dataset(tmp_path, partition_rows=5, chunk_rows=1) as both:
        assert headline(build_report(both)) == SAMPLE
