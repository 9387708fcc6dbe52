"""The three ways to a report give the same one on hostile datasets: DuckDB over the files (the default), Spark
(`local[2]`, one session for the module) and the notebook's `load_frames` + `build_report` over its frames. Times no
reader can hold, push deliveries under an agent filter, odd paths, and files written by another writer."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from converse_tap.a2a.constants import PUSH_AGENT
from converse_tap.analysis.engine import Engine
from converse_tap.analysis.load import Window, load_frames
from converse_tap.analysis.report import build_report
from converse_tap.analysis.spark import SparkEngine
from tests.analysis.frames import covered, routine, sighting
from tests.analysis.test_push_agent_filter import A, flows
from tests.analysis.test_report_scale import at, write_messages
from tests.analysis.test_spark import BY
from tests.cli_helpers import invoke
from tests.factories import write_dataset
from tests.store.test_dataset_hunt import _dataset
from tests.store.test_writer import _killed_writer


def _json(report: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(report, default=str, sort_keys=True))


def reports(root: Path, spark: Any | None, window: Window | None = None) -> dict[str, dict[str, Any]]:
    """The report over `root` by DuckDB, by the notebook's frames, and (with a session) by Spark."""
    out = {}
    with Engine.over_dataset(root, window) as e:
        out["duckdb"] = _json(build_report(e, window, by=BY))
    out["frames"] = _json(build_report(load_frames(root, window), window, by=BY))
    if spark is not None:
        with SparkEngine.over_spark(root, window, spark=spark) as e:
            out["spark"] = _json(build_report(e, window, by=BY))
    return out


# times no reader can hold ---------------------------------------------------------------------------------------

LATE, BC, OK = 9_223_372_036_854_775_000, -9_223_372_022_400_000_000, 1_795_000_000_000_000
UNTIMED_NOTE = (
    "agent message sightings with a time outside the years 1 to 9999 (no recorder's clock: files written by "
    "another tool?): 3, read as having none (ordered last, counted under the day (none))"
)


def test_spark_reads_a_time_no_reader_can_hold_as_none_with_duckdbs_note(tmp_path: Path, spark: Any) -> None:
    """Year 294247 and BC in a file another tool wrote: Spark's report failed (OverflowError fetching them); now it
    reads them as no time, as DuckDB does, and says so in the same note."""
    rows = [
        sighting("m1", conv="c1", **covered("answered")),
        sighting("m2", conv="c1", **covered("partial")),
        sighting("m3", conv="c1", **covered("unclear")),
        sighting("m1", conv="c1", **covered("unanswered")),
    ]
    root = write_messages(tmp_path, rows, [OK, LATE, BC, LATE + 1])
    with SparkEngine.over_spark(root, spark=spark) as e:
        spk = _json(build_report(e, by=BY))
    with Engine.over_dataset(root) as e:
        duck = _json(build_report(e, by=BY))
    assert UNTIMED_NOTE in spk["dataset"]["notes"]
    assert spk["dataset"]["replies"] == 3
    assert sorted(spk["groups"]["day"]) == ["(none)", "2026-11-18"]
    assert spk == duck


def test_the_ends_of_the_calendar_and_before_1970_on_every_engine(tmp_path: Path, spark: Any) -> None:
    """Times of the years 1 and 9999 and before 1970, read as written by each engine (Spark in a session set to
    rebase old times to the Julian calendar too: the dataset's are proleptic Gregorian, pyarrow's)."""
    rows = [
        sighting("m1", conv="c1", **at("0001-01-01T00:00:00Z", **routine("R", "active"))),
        sighting("m2", conv="c1", **at("9999-12-31T23:59:59.999999Z", **routine("R", "completed"))),
        sighting("m3", conv="c2", **at("1969-12-31T23:59:59Z", **covered("partial"))),
    ]
    # a session that would shift times before 1582 to the Julian calendar (as one could be set up: Spark 2's way)
    key = "spark.sql.parquet.datetimeRebaseModeInRead"
    before = spark.conf.get(key)
    spark.conf.set(key, "LEGACY")
    try:
        got = reports(write_messages(tmp_path, rows), spark)
    finally:
        spark.conf.set(key, before)
    assert got["duckdb"]["dataset"]["first_seen"] == "0001-01-01T00:00:00+00:00"
    assert got["duckdb"]["dataset"]["last_seen"] == "9999-12-31T23:59:59.999999+00:00"
    assert got["spark"] == got["duckdb"]
    assert got["frames"] == got["duckdb"]


# push deliveries under an agent filter --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pushes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(write_dataset(tmp_path_factory.mktemp("push-k"), flows()))


@pytest.mark.parametrize("agents", [(A,), (A, PUSH_AGENT), (PUSH_AGENT,)])
def test_the_notebooks_frames_for_an_agent_hold_its_pushed_replies(pushes: Path, agents: tuple[str, ...]) -> None:
    """`load_frames(root, Window(agents=…))` selected rows by their stored agent key: A's two replies that came
    only by push notification (stored under PUSH_AGENT) were missing from its frames; the report built from them
    now equals the engine's and the CLI's for `--agent`."""
    window = Window(agents=agents)
    got = reports(pushes, None, window)
    assert got["frames"] == got["duckdb"]
    args = [a for agent in agents for a in ("--agent", agent)]
    cli = invoke("report", str(pushes), *args, "--format", "json", *[a for b in BY for a in ("--by", b)])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout) == got["frames"]
    frames = load_frames(pushes, window)
    replies = {(m, a) for m, a in zip(frames.messages["message_id"], frames.messages["agent"], strict=True)}
    if agents == (A,):
        assert {("m-a1", A), ("m-a2", A), ("m-ca", A)} <= replies
        assert got["frames"]["authors"]["replies"] == 3


def test_frames_for_an_agent_without_pushed_rows_are_its_own(pushes: Path) -> None:
    b = next(a for a in load_frames(pushes).exchanges["agent"].astype(str) if a.startswith("other.test"))
    window = Window(agents=(b,))
    frames = load_frames(pushes, window)
    assert set(frames.exchanges["agent"].astype(str)) == {b}
    got = reports(pushes, None, window)
    assert got["frames"] == got["duckdb"]


# odd dataset paths, on disk and on S3 ----------------------------------------------------------------------------

ODD = "sp ace %41 #1 ?q ü€ 'x"


def test_an_odd_local_root_reads_the_same_on_every_engine(tmp_path: Path, spark: Any) -> None:
    """A root holding a space, `%41` (not an `A`), `#`, `?`, non-ASCII and a quote, beside the folder the `%41`
    would decode to: each engine reads the root's 3 exchanges."""
    root = _dataset(tmp_path / ODD, writers=1, per=3)
    _dataset(tmp_path / ODD.replace("%41", "A"), writers=1, per=5, tag="decoy")
    got = reports(root, spark)
    assert got["duckdb"]["dataset"]["exchanges"] == 3
    assert got["spark"] == got["duckdb"]
    assert got["frames"] == got["duckdb"]


def test_spark_over_s3_without_hadoop_aws_says_why_and_what_to_do(
    tmp_path: Path,
    spark: Any,
    moto: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An s3:// dataset under an odd prefix on a real S3 endpoint (moto): DuckDB reads it; Spark without the s3a
    filesystem (hadoop-aws, not in pyspark's wheel) said "An error occurred while calling o75.parquet." (exit 1);
    now a usage error naming what is missing and what to do."""
    from tests.integration.test_objstore import _aws_env

    _aws_env(monkeypatch, tmp_path, moto)
    moto.make_bucket("engines-k")
    local = _dataset(tmp_path / "local", writers=1, per=3)
    fs = pafs.S3FileSystem(
        endpoint_override=moto.endpoint.split("//")[1], scheme="http", region="us-east-1", access_key="test",
        secret_key="test",
    )  # fmt: skip
    prefix = f"engines-k/{ODD}/data"
    pafs.copy_files(str(local), prefix, destination_filesystem=fs)
    url = f"s3://{prefix}"
    duck = invoke("report", url, "--format", "json")
    assert duck.exit_code == 0, duck.output
    assert (
        json.loads(duck.stdout)["dataset"]["exchanges"]
        == json.loads(invoke("report", str(local), "--format", "json").stdout)["dataset"]["exchanges"]
    )
    spk = invoke("report", url, "--format", "json", "--engine", "spark")
    assert spk.exit_code == 2, spk.output
    assert "hadoop-aws" in spk.stderr and "--engine duckdb" in spk.stderr and url in spk.stderr
    assert "Traceback" not in spk.output


# files another writer made ---------------------------------------------------------------------------------------


def _column(t: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    return t.set_column(t.schema.get_field_index(name), pa.field(name, values.type), values)


def _plain(t: pa.Table) -> pa.Table:
    for f in t.schema:
        if pa.types.is_dictionary(f.type):
            t = _column(t, f.name, t[f.name].cast(f.type.value_type))
    return t


def _large(t: pa.Table) -> pa.Table:
    for f in t.schema:
        if pa.types.is_string(f.type.value_type if pa.types.is_dictionary(f.type) else f.type):
            t = _column(t, f.name, t[f.name].cast(pa.large_string()))
    return t


def _all_null(t: pa.Table) -> pa.Table:
    for f in t.schema:
        if f.name != "exchange_id":
            t = t.set_column(t.schema.get_field_index(f.name), f.with_nullable(True), pa.nulls(len(t), f.type))
    return t


SQLISH = ["a'); DROP TABLE sightings; --", "../../etc/passwd", 'x" OR 1=1 --', "%_*?[{}]"]


def _sqlish(t: pa.Table) -> pa.Table:
    names = pa.array([SQLISH[i % len(SQLISH)] for i in range(len(t))])
    return _column(t, "agent", names.cast(t.schema.field("agent").type))


def _times(unit: str, tz: str | None) -> Callable[[pa.Table], pa.Table]:
    def change(t: pa.Table) -> pa.Table:
        return _column(t, "ts", t["ts"].cast(pa.timestamp(unit, tz=tz)))

    return change


def _counts_as_floats(nan: bool) -> Callable[[pa.Table], pa.Table]:
    def change(t: pa.Table) -> pa.Table:
        values = t["citation_count"].cast(pa.float64()).to_pylist()  # (nulls stay null)
        if nan:
            values[:3] = [np.nan, np.inf, -np.inf][: len(values)]
        return _column(t, "citation_count", pa.array(values, pa.float64()))

    return change


def _missing(t: pa.Table) -> pa.Table:
    return t.drop_columns([c for c in ("citations", "anomalies", "coverage", "has_envelope") if c in t.column_names])


def _extra(t: pa.Table) -> pa.Table:
    return t.append_column("zzz", pa.array([1.5] * len(t))).append_column("agentx", pa.array(["q"] * len(t)))


def _status_text(t: pa.Table) -> pa.Table:
    return _column(t, "status_code", t["status_code"].cast(pa.string()))


def _as_is(t: pa.Table) -> pa.Table:
    return t


# each a file beside a table's file of the dataset: (table, change, its rows under new exchange ids)
CHANGES: dict[str, tuple[str, Callable[[pa.Table], pa.Table], bool]] = {
    "zero rows": ("messages", lambda t: t.slice(0, 0), True),
    "zero exchange rows": ("exchanges", lambda t: t.slice(0, 0), True),
    "missing columns": ("messages", _missing, True),
    "extra columns": ("messages", _extra, True),
    "plain strings": ("messages", _plain, True),
    "large strings": ("exchanges", _large, True),
    "all null": ("messages", _all_null, True),
    "all null exchanges": ("exchanges", _all_null, True),
    "sql and path agents": ("messages", _sqlish, True),
    "sql and path exchange agents": ("exchanges", _sqlish, True),
    "ns times": ("messages", _times("ns", "UTC"), True),
    "naive times": ("messages", _times("us", None), True),
    "ms times": ("messages", _times("ms", "UTC"), True),
    "whole floats": ("messages", _counts_as_floats(False), True),
    "nan and inf": ("messages", _counts_as_floats(True), True),  # (not int32: skipped, and said)
    "status as text": ("exchanges", _status_text, True),  # (another type: skipped, and said)
    "duplicate rows": ("messages", _as_is, False),
    "duplicate exchanges": ("exchanges", _as_is, False),
}


def _tamper(root: Path, name: str) -> None:
    table, change, new_ids = CHANGES[name]
    good = sorted((root / table).glob("date=*/*.parquet"))[0]
    t = pq.read_table(good)
    t = t.drop_columns([c for c in ("date",) if c in t.column_names])
    if new_ids:
        ids = pa.array([f"{name}-{x}" for x in t["exchange_id"].to_pylist()], pa.string())
        t = t.set_column(t.schema.get_field_index("exchange_id"), t.schema.field("exchange_id"), ids)
    pq.write_table(change(t), good.parent / f"part-{name.replace(' ', '-')}.parquet")


def _small(root: Path) -> Path:
    """A dataset of a few replies, routines, citations and a push delivery (tests.analysis.test_push_agent_filter)."""
    write_dataset(root, flows()[:6])
    return root


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_the_notebooks_report_equals_duckdbs_over_another_writers_file(name: str, tmp_path: Path) -> None:
    """Frames of a file of each kind: the same report, notes too (a report over frames left out the files skipped,
    the rows journaled and the capture gaps)."""
    root = _small(tmp_path / "d")
    _tamper(root, name)
    got = reports(root, None)
    assert got["frames"] == got["duckdb"]
    skipped = [n for n in got["duckdb"]["dataset"]["notes"] if n.startswith("skipped ")]
    assert len(skipped) == (name in ("nan and inf", "status as text"))


def test_spark_equals_duckdb_over_every_other_writers_file_at_once(tmp_path: Path, spark: Any) -> None:
    root = _small(tmp_path / "d")
    for name in CHANGES:
        _tamper(root, name)
    got = reports(root, spark)
    assert len([n for n in got["duckdb"]["dataset"]["notes"] if n.startswith("skipped ")]) == 2
    assert set(SQLISH) <= set(got["duckdb"]["dataset"]["agents"])
    assert got["spark"] == got["duckdb"]
    assert got["frames"] == got["duckdb"]
    window = Window(agents=(SQLISH[0], SQLISH[3], PUSH_AGENT))
    got = reports(root, spark, window)
    assert got["duckdb"]["dataset"]["agents"] == sorted(window.agents or ())
    assert got["spark"] == got["duckdb"]
    assert got["frames"] == got["duckdb"]


def test_the_notebooks_report_over_another_writers_files_in_a_time_window(tmp_path: Path) -> None:
    """`load_frames` with `--since`/`--until` over a file of times without a zone: pyarrow refused to compare them
    with the window's (ArrowInvalid, a traceback); now the range is applied to the rows as the dataset types them,
    and the report is DuckDB's."""
    root = _small(tmp_path / "d")
    for name in CHANGES:
        _tamper(root, name)
    times = load_frames(root).messages["ts"].dropna().sort_values()
    middle = times.iloc[len(times) // 2].to_pydatetime()
    for window in (Window(since=middle), Window(until=middle), Window(agents=(SQLISH[1],), since=times.iloc[0])):
        got = reports(root, None, window)
        assert got["duckdb"]["dataset"]["agent_message_sightings"] > 0
        assert got["frames"] == got["duckdb"]


def test_the_notebooks_report_says_what_duckdbs_does_of_journaled_rows(tmp_path: Path) -> None:
    """Rows a recorder journaled and never rolled into Parquet (a recorder that stopped): the frames hold them and
    the report over them now says so, as DuckDB's does."""
    _killed_writer(tmp_path)
    got = reports(tmp_path, None)
    assert any("journals of a recorder that stopped" in n for n in got["duckdb"]["dataset"]["notes"])
    assert got["frames"] == got["duckdb"]


def test_a_java_error_is_told_by_its_own_first_line_not_py4js(spark: Any) -> None:
    """Spark's errors reach Python as py4j's `Py4JJavaError`, whose message starts "An error occurred while calling
    oNN.method.": the CLI's message (`first_line`) takes the Java exception's own first line instead."""
    from py4j.protocol import Py4JJavaError

    from converse_tap.cli.guards import first_line

    with pytest.raises(Py4JJavaError) as caught:
        spark._jvm.java.io.FileInputStream("/no/such/dir/for-the-test")
    assert str(caught.value).startswith("An error occurred while calling")
    line = first_line(caught.value)
    assert "FileNotFoundException" in line and "/no/such/dir" in line and "An error occurred" not in line
