"""The report on Apache Spark (`local[2]`, one session for the module) equals DuckDB's, number for number, on the
golden sample, the demo's dataset and a generated one of 1M sightings; the CLI's `--engine spark` and its errors."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from converse_tap.analysis import engine as sql
from converse_tap.analysis.engine import Engine
from converse_tap.analysis.load import Window, parse_when
from converse_tap.analysis.report import build_report
from converse_tap.analysis.spark import SparkEngine, s3a_conf
from converse_tap.analysis.spark_sql import to_spark
from tests.cli_helpers import invoke

BY = ("agent", "day", "routine")


def both(root: Path, spark: Any, window: Window | None = None) -> tuple[str, str]:
    """The JSON reports of DuckDB and Spark over `root` (the report has no engine-specific field)."""
    with Engine.over_dataset(root, window) as e:
        duck = build_report(e, window, by=BY)
    with SparkEngine.over_spark(root, window, spark=spark) as e:
        spk = build_report(e, window, by=BY)
    return json.dumps(duck, sort_keys=True, indent=1), json.dumps(spk, sort_keys=True, indent=1)


def test_every_statement_transpiles_without_duckdb_only_constructs() -> None:
    statements = [sql.KEYS, sql.REPLIES, sql.LAST_VERDICTS, sql.TURNS, sql.INSTANCES, sql.CITED, sql.CITED_TITLES]
    statements += [sql.ANOMALIES, sql.conversations_sql(sql.GROUP_KEYS["day"])]
    key = sql.GROUP_KEYS["agent"]
    statements += [sql.routine_counts_sql(key, 1_700_000_000_000_000, 10**9), sql.routine_middles_sql(key)]
    statements += [sql.abandoned_slots_sql(key)]
    for text in statements:
        out = to_spark(text).upper()
        for construct in ("INT128", "HUGEINT", "SHIFTLEFT", "EPOCH_US", "ARG_MAX", "ARG_MIN", "LENGTH(ANOMALIES"):
            assert construct not in out, (construct, out)
        for construct in ("LENGTH(ABANDONED_AT", "LIST_TRANSFORM", "LIST_FILTER"):
            assert construct not in out, (construct, out)


def test_golden_sample_reports_are_equal(sample: Path, spark: Any) -> None:
    duck, spk = both(sample, spark)
    assert json.loads(duck)["dataset"]["replies"] > 0
    assert spk == duck


def test_a_window_outside_every_partition_reads_nothing(sample: Path, spark: Any) -> None:
    away = Window(since=parse_when("2001-01-01"))  # after the sample's one date= partition
    duck, spk = both(sample, spark, away)
    assert json.loads(spk)["dataset"]["agent_message_sightings"] == 0
    assert spk == duck


@pytest.mark.integration
def test_demo_dataset_reports_are_equal(tmp_path: Path, spark: Any) -> None:
    from converse_tap.demo.run import run_demo

    result = asyncio.run(run_demo(tmp_path, conversations=12, seed=3, concurrency=4))
    assert result.stats.errors == []
    duck, spk = both(tmp_path, spark)
    assert json.loads(duck)["routines"]["instances"] > 0
    assert spk == duck


def test_generated_million_rows_reports_are_equal(tmp_path: Path, spark: Any) -> None:
    from benchmarks.bench_analysis import generate

    generate(tmp_path, 1_000_000)
    duck, spk = both(tmp_path, spark)
    assert json.loads(duck)["dataset"]["agent_message_sightings"] == 1_000_000
    assert spk == duck


def test_cli_report_and_check_on_spark(sample: Path, spark: Any) -> None:
    duck = invoke("report", str(sample), "--format", "json")
    spk = invoke("report", str(sample), "--format", "json", "--engine", "spark")
    assert spk.exit_code == 0, spk.output
    assert json.loads(spk.stdout) == json.loads(duck.stdout)
    assert spark.sparkContext._jsc is not None  # the CLI left the running session running
    gate = ["check", str(sample), "--max-unanswered-share", "0.9", "--format", "json"]
    for engine in ("duckdb", "spark"):
        r = invoke(*gate, "--engine", engine)
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["passed"] is True
    r = invoke("report", str(sample), "--engine", "spark", "--examples", "3")
    assert r.exit_code == 2 and "--examples" in r.output


def _cli(args: list[str], env: dict[str, str], prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}import sys; from converse_tap.cli import main; sys.argv = ['converse-tap', *{args!r}]; main()"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_without_java_the_cli_says_what_to_install(sample: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # no java on it
    r = _cli(["report", str(sample), "--engine", "spark"], env)
    assert r.returncode == 2, r.stderr
    assert "Java 17" in r.stderr and "Traceback" not in r.stderr


def test_without_pyspark_the_cli_says_what_to_install(sample: Path) -> None:
    block = "import sys; sys.modules['pyspark'] = None; "  # as if the extra were not installed
    r = _cli(["check", str(sample), "--engine", "spark", "--no-anomalies"], dict(os.environ), block)
    assert r.returncode == 2, r.stderr
    assert "a2a-converse-tap[spark]" in r.stderr and "Traceback" not in r.stderr


def test_s3a_settings_come_from_the_aws_environment() -> None:
    env = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "id",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_SESSION_TOKEN": "token",
    }
    conf = s3a_conf(env)
    pre = "spark.hadoop.fs.s3a."
    assert conf[pre + "endpoint"] == "http://127.0.0.1:9000"
    assert conf[pre + "path.style.access"] == "true" and conf[pre + "connection.ssl.enabled"] == "false"
    assert conf[pre + "endpoint.region"] == "eu-west-1"
    keys = (conf[pre + "access.key"], conf[pre + "secret.key"], conf[pre + "session.token"])
    assert keys == ("id", "secret", "token")
    assert conf[pre + "aws.credentials.provider"].endswith("TemporaryAWSCredentialsProvider")
    assert s3a_conf({}) == {}  # no keys: s3a's own provider chain (instance profile, web identity)
