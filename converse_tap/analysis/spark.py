"""The report on Apache Spark: the same SQL as engine.py (transpiled by `spark_sql.to_spark`), run by a Spark
session over the dataset's Parquet files, local (`local[2]`) or on a cluster (`--spark-master`, spark-submit).

The seam is the engine's connection: `SparkEngine` is an `Engine` whose connection runs each statement on Spark.
Its views are `sightings`, `exchanges` and `agent_cards`, read with `spark.read.parquet`; `replies` and
`last_verdicts` are cached temporary views (`CACHE TABLE`, memory then disk). The report's pandas stages run over
the small aggregates the SQL returns (counts per agent, day and routine; one row per routine instance), which are
collected to the driver as Arrow.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pyarrow as pa

from ..store.reader import Journals, TableFiles, table_files
from ..store.schema import TABLES
from .agent_filter import scan_window, view_name
from .dataset_views import calendar_view, read_views
from .engine import Engine
from .load import AGENT_SAID, CARD_COLUMNS, EXCHANGE_COLUMNS, MESSAGE_COLUMNS, Window, skipped_files
from .sources import _arrow, _journaled, _journals_then_files, _window_sql
from .spark_scan import hadoop_literal, key, local, scan_files, typed
from .spark_sql import to_spark

INSTALL = "pip install 'a2a-converse-tap[spark]'"
JAVA = "Spark needs Java 17 or later: install it (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"


class SparkUnavailable(RuntimeError):
    """pyspark or Java is missing, or the session could not start: the message says what to install."""


def s3a_conf(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Hadoop s3a settings from the standard AWS environment variables (endpoint, region, credentials), for a
    dataset on s3://. Without keys in the environment, s3a's own chain (instance profile, web identity) applies."""
    env = os.environ if env is None else env
    conf = {}
    pre = "spark.hadoop.fs.s3a."
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        conf[pre + "endpoint"] = endpoint
        conf[pre + "path.style.access"] = "true"  # MinIO and most S3-compatible stores
        conf[pre + "connection.ssl.enabled"] = str(endpoint.startswith("https://")).lower()
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        conf[pre + "endpoint.region"] = region
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        conf[pre + "access.key"] = env["AWS_ACCESS_KEY_ID"]
        conf[pre + "secret.key"] = env["AWS_SECRET_ACCESS_KEY"]
        if env.get("AWS_SESSION_TOKEN"):
            conf[pre + "session.token"] = env["AWS_SESSION_TOKEN"]
            conf[pre + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
        else:
            conf[pre + "aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
    return conf


def is_s3(root: str | Path) -> bool:
    return str(root).startswith(("s3://", "s3a://"))


def spark_session(master: str | None = None, conf: Mapping[str, str] | None = None) -> Any:
    """A Spark session (the running one if there is one: spark-submit's, a test's): UTC, no UI, quiet; on a local
    master, few shuffle partitions. Raises `SparkUnavailable` saying what to install."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailable(f"--engine spark needs pyspark: {INSTALL}") from e
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise SparkUnavailable(f"{JAVA} (no `java` on PATH)")
    builder = SparkSession.builder.appName("converse-tap report")
    if master:
        builder = builder.master(master)
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **(conf or {}),
    }
    if (master or "local").startswith("local"):
        settings.setdefault("spark.sql.shuffle.partitions", "2")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # local workers run the driver's interpreter
    for name, value in settings.items():
        builder = builder.config(name, value)
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # pyspark reports a JVM that would not start as a bare runtime error
        raise SparkUnavailable(f"Spark did not start ({str(e).splitlines()[0]}); {JAVA}") from e
    spark.sparkContext.setLogLevel("ERROR")
    for name in ("spark.sql.session.timeZone", *[k for k in settings if k.startswith("spark.sql.")]):
        spark.conf.set(name, settings[name])  # a running session keeps its own: the SQL's settings matter here
    return spark


class _Result:
    def __init__(self, frame: Any) -> None:
        self.frame = frame

    def to_arrow_table(self) -> pa.Table:
        return cast(pa.Table, self.frame.toArrow())

    def fetchall(self) -> list[tuple[Any, ...]]:
        table = self.to_arrow_table()
        return [tuple(r.values()) for r in table.to_pylist()]


def _table_name(tree: Any) -> str:
    from sqlglot import exp

    table = tree.find(exp.Table)
    if table is None:
        raise ValueError(f"no table named in {tree.sql()}")
    return str(table.name)


class SparkConnection:
    """What an `Engine` asks of its connection (`sql`, `execute`, `register`, `close`), on a Spark session: each
    statement is DuckDB's text transpiled to Spark SQL; a temporary table is a temporary view of a
    local checkpoint (its rows held by Spark's block manager, memory then disk)."""

    def __init__(self, spark: Any, own: bool) -> None:
        self.spark, self.own = spark, own
        self.views: list[str] = []
        self.tables: dict[str, Any] = {}  # the materialised ones

    def sql(self, text: str) -> _Result:
        return _Result(self.spark.sql(to_spark(text)))

    def execute(self, text: str) -> None:
        import sqlglot
        from sqlglot import exp

        tree = sqlglot.parse_one(text, read="duckdb")
        if isinstance(tree, exp.Create):
            name = _table_name(tree)
            body = to_spark(tree.expression.sql(dialect="duckdb"))
            if tree.kind == "TABLE":  # materialised (memory, then disk), no longer resting on what it was built from
                frame = self.spark.sql(body).localCheckpoint(eager=True)
                frame.createOrReplaceTempView(name)
                self.tables[name] = frame
            else:
                self.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {name} AS {body}")
            self.views.append(name)
        elif isinstance(tree, exp.Drop):
            self._drop(_table_name(tree))
        else:
            self.spark.sql(to_spark(text))

    def register(self, name: str, frame: Any) -> None:
        frame.createOrReplaceTempView(name)
        self.views.append(name)

    def _drop(self, name: str) -> None:
        self.spark.catalog.dropTempView(name)
        frame = self.tables.pop(name, None)
        if frame is not None:
            frame.unpersist()
        if name in self.views:
            self.views.remove(name)

    def close(self) -> None:
        for name in list(reversed(self.views)):
            self._drop(name)
        if self.own:
            self.spark.stop()


class SparkEngine(Engine):
    """An `Engine` whose SQL runs on Spark (build the report with `report.build_report(engine)` as with DuckDB)."""

    @classmethod
    def over_spark(
        cls,
        root: str | Path,
        window: Window | None = None,
        spark: Any = None,
        master: str | None = None,
        conf: Mapping[str, str] | None = None,
    ) -> SparkEngine:
        """Views over the dataset at `root` (a directory, or s3:// read as s3a:// with `s3a_conf`'s settings), in
        the session `spark` (left running on close) or one started here on `master` (stopped on close)."""
        window = window or Window()
        s3 = is_s3(root)
        own = False
        if spark is None:
            own = _active() is None  # one already running (spark-submit's, a test's) stays
            spark = spark_session(master, {**(s3a_conf() if s3 else {}), **(conf or {})})
        con = SparkConnection(spark, own)
        try:
            present, skipped, journals, listed = _views(con, str(root), window, s3)
        except BaseException:
            con.close()
            raise
        engine = cls(cast(Any, con), str(root), present, "")  # closed as a DuckDB one is: con.close()
        engine.skipped, engine.journals, engine.listed = skipped, journals, listed
        engine._read_views = True
        return engine

    def cards(self) -> pd.DataFrame:
        """The cards in the window, in their place in the data (as `Engine.cards`)."""
        return self.df("SELECT * FROM agent_cards ORDER BY pos").drop(columns=["pos"])


def _active() -> Any:
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailable(f"--engine spark needs pyspark: {INSTALL}") from e
    return SparkSession.getActiveSession()


def _no_s3a(spark: Any, root: str) -> str:
    """Why Spark cannot read an s3:// dataset without hadoop-aws, and what to do."""
    try:
        version = str(spark.sparkContext._jvm.org.apache.hadoop.util.VersionInfo.getVersion())
    except Exception:  # (a session whose JVM is out of reach: the generic spelling)
        version = "<your Hadoop version>"
    return (
        f"Spark cannot read {root}: its s3a filesystem (org.apache.hadoop.fs.s3a.S3AFileSystem, in hadoop-aws) is "
        f"not on Spark's classpath; add it (spark-submit --packages org.apache.hadoop:hadoop-aws:{version}, or "
        "spark.jars.packages), or run the report on DuckDB (--engine duckdb), which reads s3:// itself"
    )


def _spark_schema(spark: Any, table: str, columns: list[str]) -> Any:
    return spark.createDataFrame(_arrow(pd.DataFrame(), table, columns)).schema


def _views(
    con: SparkConnection, root: str, window: Window, s3: bool
) -> tuple[list[str], list[tuple[str, str]], Any, dict[str, Any]]:
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    spark = con.spark
    first = window.since.strftime("%Y-%m-%d") if window.since else None
    last = window.until.strftime("%Y-%m-%d") if window.until else None
    if s3:
        # an s3 dataset's journals stay on its recorders' hosts until rolled
        journals, listed = Journals(), cast(dict[str, TableFiles], {})
    else:
        journals, listed = _journals_then_files(root, first, last)
    present: list[str] = []
    for table, columns, ts in (
        ("messages", [*MESSAGE_COLUMNS, "object_kind"], "ts"),
        ("exchanges", EXCHANGE_COLUMNS, "ts_start"),
        ("agent_cards", CARD_COLUMNS, "ts"),
    ):
        schema = _spark_schema(spark, table, columns)
        frames = []
        reader = spark.read
        # the dataset's times are proleptic Gregorian (pyarrow's, DuckDB's): one before 1582 (or 1900) is read as
        # written, never shifted to the Julian calendar nor refused, whatever the session's default (Spark 3's
        # refuses them in files not its own)
        reader = reader.option("datetimeRebaseMode", "CORRECTED").option("int96RebaseMode", "CORRECTED")
        if s3:
            base = "s3a://" + root.split("://", 1)[1].rstrip("/") + f"/{table}"
            try:
                scan = reader.option("mergeSchema", "true").parquet(hadoop_literal(base))
            except AnalysisException as e:
                if "PATH_NOT_FOUND" not in str(e):
                    raise
                scan = spark.createDataFrame([], _spark_schema(spark, table, columns))  # a table never written
            except Exception as e:  # (py4j's error on a Java exception: the class s3a needs is not on the classpath)
                if "S3AFileSystem not found" not in str(e):
                    raise
                raise SparkUnavailable(_no_s3a(spark, root)) from None
            if first is not None and "date" in scan.columns:
                scan = scan.where(F.col("date") >= first)  # partition pruning on the date= directories
            if last is not None and "date" in scan.columns:
                scan = scan.where(F.col("date") <= last)
            files = sorted(local(u) for u in scan.inputFiles())
        else:
            files = listed[table].files  # the window's partitions only, foreign files left out
            scan = None
        if files and scan is None:
            frames.append(scan_files(spark, reader, root, table, files, schema))
        elif files and scan is not None:
            # a sighting's position: its file's place in the listing, then its row (as engine.py numbers them)
            keys = {local(u): key(u) for u in scan.inputFiles()}
            index = spark.createDataFrame([(keys[f], i) for i, f in enumerate(files)], "path string, i long")
            scan = scan.select(
                *typed(scan, schema, {}),
                F.regexp_replace(F.col("_metadata.file_path"), "^file:/+", "/").alias("_path"),
                F.col("_metadata.row_index").alias("_row"),
            )
            scan = scan.join(F.broadcast(index), scan["_path"] == index["path"])
            frames.append(scan.select(*columns, (F.shiftleft(F.col("i"), 40) + F.col("_row")).alias("pos")))
        pending = journals.tables[table] if not s3 else []
        if pending:  # after every file, in the order they were journaled
            frames.append(spark.createDataFrame(_journaled(pending, table, columns, len(files))))
        if frames:
            present.append(table)
        else:
            empty = _arrow(pd.DataFrame(), table, columns)
            frames.append(spark.createDataFrame(empty.append_column("pos", pa.array([], pa.int64()))))
        union = frames[0]
        for other in frames[1:]:
            union = union.unionByName(other)
        con.register(f"_{table}_scan", union)
        where = _window_sql(scan_window(table, window), ts)
        if table == "messages":
            where += f" AND {AGENT_SAID}"
        # (a time no reader can hold read as none, as DuckDB reads it, with the same note: dataset_views.py)
        calendar_view(con, view_name(table, window), f"SELECT * FROM _{table}_scan WHERE {where}", ts, columns)
    read_views(con, window)
    return [t for t in TABLES if t in present], skipped_files(listed, journals), journals, listed


__all__ = ["INSTALL", "SparkEngine", "SparkUnavailable", "hadoop_literal", "s3a_conf", "spark_session", "table_files"]
