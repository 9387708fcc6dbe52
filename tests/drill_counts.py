"""The report's figures re-counted with `converse-tap sql` over the named views, under the keys of
`demo.run.report_actuals`, so one comparison covers golden data, the demo's ground truth and the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from converse_tap.cli import cli


def sql(dataset: Path, query: str) -> list[dict[str, Any]]:
    r = CliRunner().invoke(cli, ["sql", str(dataset), query, "--format", "json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def counted(dataset: Path, query: str) -> dict[str, int]:
    """A `SELECT key, n` query as {key: n}, zero counts left out (as report_actuals leaves them)."""
    return {str(r["k"]): r["n"] for r in sql(dataset, query) if r["n"]}


def sql_actuals(dataset: Path) -> dict[str, Any]:
    (conv,) = sql(
        dataset,
        """SELECT count(*) AS conversations, count(*) FILTER (WHERE human_replies > 0) AS with_human,
                  sum(suppressed_turns) AS suppressed, sum(handoffs_to_human) AS handoffs,
                  sum(handbacks_to_agent) AS handbacks FROM conversations""",
    )
    (inst,) = sql(
        dataset,
        """SELECT count(*) AS instances, count(*) FILTER (WHERE outcome = 'completed') AS completed,
                  count(*) FILTER (WHERE outcome = 'abandoned') AS abandoned,
                  count(*) FILTER (WHERE outcome = 'open') AS open FROM routine_instances""",
    )
    by_routine: dict[str, dict[str, int]] = {}
    for r in sql(dataset, "SELECT routine, outcome, count(*) AS n FROM routine_instances GROUP BY ALL"):
        by_routine.setdefault(r["routine"], {"completed": 0, "abandoned": 0, "open": 0})[r["outcome"]] = r["n"]
    return {
        "coverage.turns_with_coverage": sql(dataset, "SELECT count(*) AS n FROM turns")[0]["n"],
        "coverage.turns_assessed": sql(
            dataset, "SELECT count(*) AS n FROM turns WHERE coverage_availability = 'assessed'"
        )[0]["n"],
        "coverage.by_coverage": counted(
            dataset,
            """SELECT coalesce(coverage, '(none)') AS k, count(*) AS n FROM turns
               WHERE coverage_availability = 'assessed' GROUP BY ALL ORDER BY k""",
        ),
        "coverage.by_reason": counted(
            dataset,
            """SELECT coalesce(coverage_reason, '(none)') AS k, count(*) AS n FROM turns
               WHERE coverage_availability = 'assessed' GROUP BY ALL ORDER BY k""",
        ),
        "coverage.by_availability": counted(
            dataset, "SELECT coverage_availability AS k, count(*) AS n FROM turns GROUP BY ALL ORDER BY k"
        ),
        "authors.by_author": counted(
            dataset, "SELECT author AS k, count(*) AS n FROM replies WHERE author IS NOT NULL GROUP BY ALL ORDER BY k"
        ),
        "authors.conversations": conv["conversations"],
        "authors.conversations_with_human": conv["with_human"],
        "authors.suppressed_turns": conv["suppressed"],
        "authors.handoffs_to_human": conv["handoffs"],
        "authors.handbacks_to_agent": conv["handbacks"],
        "routines.instances": inst["instances"],
        "routines.completed": inst["completed"],
        "routines.abandoned": inst["abandoned"],
        "routines.open": inst["open"],
        "routines.by_routine": dict(sorted(by_routine.items())),
        "routines.abandoned_at": counted(
            dataset,
            """SELECT routine || '/' || slot AS k, count(*) AS n FROM routine_instances,
                      unnest(CASE WHEN len(abandoned_at) = 0 THEN ['(none)'] ELSE abandoned_at END) AS t(slot)
               WHERE outcome = 'abandoned' GROUP BY ALL""",
        ),
        "invocations.by_outcome": counted(
            dataset,
            """SELECT coalesce(invocation_outcome, '(none)') AS k, count(*) AS n FROM replies
               WHERE invocation_outcome IS NOT NULL OR invocation_tool_name IS NOT NULL GROUP BY ALL ORDER BY k""",
        ),
    }
