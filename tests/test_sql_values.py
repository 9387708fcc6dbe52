"""Values JSON cannot hold or Python cannot represent, in every `sql` format: NaN and the infinities, infinite
dates and times, years beyond 9999 or before 1, nested in structs, lists and maps. Each format stays valid and
the command never stops with a traceback."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.cli_helpers import invoke

QUERY = """SELECT 'nan'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, '-inf'::FLOAT AS ninf,
                  'infinity'::TIMESTAMP AS ts_inf, '-infinity'::DATE AS d_ninf, '294247-01-01'::DATE AS far,
                  '5877642-06-25 (BC)'::DATE AS bc, {'a': 'infinity'::TIMESTAMPTZ, 'b': 'nan'::DOUBLE} AS s,
                  ['294247-01-01'::DATE] AS l, MAP {'k': '-infinity'::TIMESTAMP} AS m, '2026-01-02'::DATE AS ok"""
EXPECTED = {
    "nan": "NaN",
    "inf": "Infinity",
    "ninf": "-Infinity",
    "ts_inf": "infinity",
    "d_ninf": "-infinity",
    "far": "294247-01-01",
    "bc": "-5877641-06-25",
    "s": {"a": "infinity", "b": "NaN"},
    "l": ["294247-01-01"],
    "m": [["k", "-infinity"]],
    "ok": "2026-01-02",
}


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_formats_stay_valid_json(sample: Path, fmt: str) -> None:
    r = invoke("sql", str(sample), QUERY, "--format", fmt)
    assert r.exit_code == 0, r.stderr
    text = r.stdout if fmt == "json" else "[" + ",".join(r.stdout.splitlines()) + "]"

    def strict(token: str) -> None:
        raise AssertionError(f"{token} is not JSON")

    assert json.loads(text, parse_constant=strict) == [EXPECTED]


def test_csv_and_table_carry_the_same_values(sample: Path) -> None:
    r = invoke("sql", str(sample), QUERY, "--format", "csv")
    assert r.exit_code == 0, r.stderr
    (row,) = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {k: v for k, v in row.items() if k not in ("s", "l", "m")} == {
        k: v for k, v in EXPECTED.items() if k not in ("s", "l", "m")
    }
    assert json.loads(row["s"]) == EXPECTED["s"]
    r = invoke("sql", str(sample), QUERY, "--format", "table")
    assert r.exit_code == 0 and "294247-01-01" in r.stdout and "-infinity" in r.stdout


def test_csv_text_that_a_spreadsheet_would_run_is_kept_as_text(sample: Path) -> None:
    query = """SELECT '=HYPERLINK("http://evil.test","x")' AS eq, '+1+1' AS plus, '-2+3' AS minus, '@SUM(A1)' AS at,
                      chr(9) || '=1' AS tab, chr(13) || '=1' AS cr, -2 AS number, 'plain' AS text, ['=x'] AS list"""
    r = invoke("sql", str(sample), query, "--format", "csv")
    assert r.exit_code == 0, r.stderr
    (row,) = list(csv.DictReader(io.StringIO(r.stdout, newline="")))  # a CR in a value stays in its field
    assert row == {
        "eq": '\'=HYPERLINK("http://evil.test","x")',
        "plus": "'+1+1",
        "minus": "'-2+3",
        "at": "'@SUM(A1)",
        "tab": "'\t=1",
        "cr": "'\r=1",
        "number": "-2",  # a number is no formula
        "text": "plain",
        "list": '["=x"]',
    }
    # the JSON formats carry the value itself
    r = invoke("sql", str(sample), query, "--format", "json")
    assert json.loads(r.stdout)[0]["eq"] == '=HYPERLINK("http://evil.test","x")'


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "table"])
def test_a_name_used_twice_keeps_both_columns(sample: Path, fmt: str) -> None:
    """`SELECT e.anomalies, m.anomalies` of a join: rows were dicts by name, so one column was lost and the CSV
    writer stopped with a traceback. The second is named `anomalies_2` (never a name another column has)."""
    query = "SELECT 1 AS a, 2 AS a, 3 AS a_2, 4 AS a"
    r = invoke("sql", str(sample), query, "--format", fmt)
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    if fmt == "csv":
        assert r.stdout.splitlines() == ["a,a_3,a_2,a_4", "1,2,3,4"]
    elif fmt == "table":
        assert "a_3" in r.stdout and "a_4" in r.stdout
    else:
        text = r.stdout if fmt == "json" else "[" + r.stdout.strip() + "]"
        assert json.loads(text) == [{"a": 1, "a_3": 2, "a_2": 3, "a_4": 4}]
