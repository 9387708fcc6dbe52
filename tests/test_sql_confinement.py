"""`converse-tap sql` runs one read-only query over the dataset's views and nothing else: no file outside the
dataset read or listed, no file written (not even a dataset file), no setting changed, no extension installed or
loaded, no database attached. Confined by DuckDB's own sandbox (analysis.drill.confine), with real files on disk."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli_helpers import invoke

SECRET = "s3cr3t-token-do-not-print"


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory beside the dataset with files a query must not reach."""
    d = tmp_path_factory.mktemp("outside")
    (d / "secret.csv").write_text(f"name,value\ntoken,{SECRET}\n")
    (d / "secret.json").write_text(json.dumps({"token": SECRET}))
    pq.write_table(pa.table({"token": [SECRET]}), d / "secret.parquet")
    return d


def _digests(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def refused(dataset: Path, query: str) -> str:
    r = invoke("sql", str(dataset), query, "--format", "csv")
    assert r.exit_code == 2, (query, r.exit_code, r.stdout)
    assert SECRET not in r.stdout + r.stderr and "Traceback" not in r.stderr
    assert r.stderr.startswith("Error: ")
    return str(r.stderr)


@pytest.mark.parametrize(
    "reader",
    [
        "read_csv('{d}/secret.csv')",
        "read_csv_auto('{d}/secret.csv')",
        "read_json_auto('{d}/secret.json')",
        "read_text('{d}/secret.csv')",
        "read_blob('{d}/secret.csv')",
        "read_parquet('{d}/secret.parquet')",
        "'{d}/secret.parquet'",
        "glob('{d}/*')",
        "sniff_csv('{d}/secret.csv')",
        "read_text('/etc/passwd')",
    ],
)
def test_a_query_cannot_read_or_list_files_outside_the_dataset(sample: Path, outside: Path, reader: str) -> None:
    err = refused(sample, f"SELECT * FROM {reader.format(d=outside)}")
    assert "the query reaches outside the dataset" in err


def test_a_query_cannot_read_the_dataset_s_other_files_by_path_either(sample: Path) -> None:
    # the views read the dataset's own files; a path pattern over the dataset is still a path the query chose
    refused(sample, f"SELECT * FROM read_parquet('{sample}/*/*/*.parquet')")
    refused(sample, f"SELECT * FROM glob('{sample}/**')")


@pytest.mark.parametrize(
    "query",
    [
        "EXPLAIN ANALYZE COPY (SELECT 42 AS x) TO '{out}'",
        "EXPLAIN /* comment */ ANALYZE COPY (SELECT 42 AS x) TO '{out}'",
        "EXPLAIN ANALYZE COPY (SELECT 42 AS x) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)",
        "EXPLAIN ANALYZE SET enable_external_access = true",
        "EXPLAIN ANALYZE INSTALL httpfs",
        "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
        "EXPLAIN ANALYZE DROP VIEW stored.exchanges",
        "SELECT * FROM query('COPY (SELECT 42) TO ''{out}''')",
        "COPY (SELECT 42 AS x) TO '{out}'",
        "ATTACH '{out}.db' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "RESET lock_configuration",
        "PRAGMA enable_profiling",
        "SELECT 1; COPY (SELECT 42) TO '{out}'",
    ],
)
def test_a_query_cannot_write_attach_install_or_change_settings(sample: Path, tmp_path: Path, query: str) -> None:
    out = tmp_path / "written.csv"
    part = next(sample.glob("exchanges/*/*.parquet"))
    before = _digests(sample)
    refused(sample, query.format(out=out, part=part))
    assert not out.exists() and not Path(f"{out}.db").exists()
    assert _digests(sample) == before  # no dataset file overwritten


def test_settings_stay_locked_and_extensions_unloadable_inside_a_select(sample: Path) -> None:
    r = invoke(
        "sql",
        str(sample),
        "SELECT current_setting('enable_external_access') AS ext, current_setting('lock_configuration') AS locked,"
        " current_setting('autoinstall_known_extensions') AS install",
        "--format",
        "json",
    )
    assert json.loads(r.stdout) == [{"ext": False, "locked": True, "install": False}]


def test_read_only_queries_and_their_plans_still_run(sample: Path) -> None:
    for query in (
        "EXPLAIN ANALYZE SELECT count(*) FROM turns",
        "EXPLAIN /* c */ SELECT * FROM replies",
        "EXPLAIN (FORMAT json) SELECT 1",
        "WITH t AS (SELECT * FROM exchanges) SELECT count(*) FROM t",
        "FROM messages LIMIT 1",
        "SUMMARIZE SELECT * FROM exchanges",
    ):
        r = invoke("sql", str(sample), query, "--format", "json")
        assert r.exit_code == 0 and json.loads(r.stdout), query
    r = invoke("sql", str(sample), "SELECT count(*) AS n FROM routine_instances", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["n"] > 0
