import math
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from converse_tap.analysis import metrics as m
from converse_tap.analysis.report import build_report
from converse_tap.analysis.stats import wilson
from tests.analysis.frames import T0, covered, frames, messages, routine, sighting


def textbook_wilson(k: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    p = k / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - margin) / (1 + z * z / n), (centre + margin) / (1 + z * z / n)


def test_wilson_matches_textbook_and_edges() -> None:
    share, lo, hi = wilson(3, 4)
    assert share == 0.75
    assert (lo, hi) == pytest.approx(textbook_wilson(3, 4))
    assert wilson(0, 0) == (None, None, None)
    assert wilson(0, 5)[1] == 0.0 and wilson(5, 5)[2] == 1.0


def test_polled_and_history_sightings_count_once() -> None:
    msgs = messages(
        sighting("a", minute=1, **covered("partial")),
        sighting("a", minute=5, **covered("partial")),  # GetTask poll
        sighting("a", minute=9, **covered("partial")),  # history of a later turn
        sighting("b", minute=2, **covered("answered")),
    )
    rep = m.replies(msgs)
    assert rep["reply_key"].tolist() == ["a", "b"]  # ordered by first sighting
    assert rep.set_index("reply_key")["first_seen"]["a"] == T0 + pd.Timedelta(minutes=1)


def test_a_request_claiming_the_agents_role_is_not_a_reply() -> None:
    """A client can send a message with role `agent`, an envelope and a real reply's message id: it counted as a
    reply, and, seen last, overwrote the agent's own verdict."""
    msgs = messages(
        sighting("a", minute=1, **covered("partial")),
        sighting("a", minute=5, direction="request", **covered("answered")),  # the client's spoof of `a`
        sighting("s", minute=6, direction="request", **covered("answered")),  # and one of its own
    )
    rep = m.replies(msgs)
    assert rep["reply_key"].tolist() == ["a"]
    assert rep["coverage"].tolist() == ["partial"]


def test_sightings_in_the_same_microsecond_are_ordered_by_their_place_in_the_data() -> None:
    msgs = messages(
        sighting("a", minute=1, **covered("partial")),
        sighting("b", minute=1, **covered("answered")),
        sighting("a", minute=1, **covered("answered")),  # a later row of the same instant: the last sighting
    )
    rep = m.replies(msgs)
    assert rep["reply_key"].tolist() == ["a", "b"]
    assert rep.set_index("reply_key")["coverage"].to_dict() == {"a": "answered", "b": "answered"}


def test_user_messages_artifacts_and_unenveloped_messages_are_not_replies() -> None:
    msgs = messages(
        sighting("u", role="user"),
        sighting("n", has_envelope=False),
        sighting("r", **covered("answered")),
    )
    assert m.replies(msgs)["reply_key"].tolist() == ["r"]


def test_a_turn_seen_with_two_verdicts_keeps_the_last() -> None:
    msgs = messages(
        sighting("first", minute=1, **covered("partial", "insufficient_evidence", turn="t1")),
        sighting("second", minute=2, **covered("answered", turn="t1")),
        sighting("other", minute=3, **covered("unanswered", "intentional_scope_boundary")),
    )
    turns = m.turns(m.replies(msgs))
    assert sorted(turns["turn_id"]) == ["other", "t1"]
    assert turns.set_index("turn_id")["coverage"]["t1"] == "answered"


def test_coverage_distribution_over_assessed_turns_and_availability_over_all() -> None:
    msgs = messages(
        sighting("1", **covered("answered")),
        sighting("2", **covered("answered")),
        sighting("3", **covered("answered")),
        sighting("4", **covered("partial", "insufficient_evidence")),
        sighting("5", **covered(None, None, availability="not_recorded")),
        sighting("6", **covered("mostly", "vibes")),  # unknown values stay verbatim
    )
    turns = m.turns(m.replies(msgs))
    dist = m.coverage_distribution(turns).set_index("value")
    assert dist["count"].to_dict() == {"answered": 3, "partial": 1, "mostly": 1}
    assert dist.loc["answered", "share"] == pytest.approx(3 / 5)
    assert (dist.loc["answered", "ci_low"], dist.loc["answered", "ci_high"]) == pytest.approx(textbook_wilson(3, 5))
    reasons = m.coverage_reasons(turns).set_index("value")["count"].to_dict()
    assert reasons == {"sufficient_evidence": 3, "insufficient_evidence": 1, "vibes": 1}
    assert m.coverage_availability(turns).set_index("value")["count"].to_dict() == {
        "assessed": 5,
        "not_recorded": 1,
    }


def test_authors_conversations_suppression_and_ownership_changes() -> None:
    msgs = messages(
        sighting("1", conv="c1", minute=1, author="agent", ownership_state="ai_owned"),
        sighting("2", conv="c1", minute=2, author="human", ownership_state="human_owned"),
        sighting("3", conv="c1", minute=3, author=None, ownership_state="human_owned", ownership_suppressed=True),
        sighting("4", conv="c1", minute=4, author="agent", ownership_state="ai_owned"),
        sighting("5", conv="c2", minute=1, author="agent", ownership_state="ai_owned"),
        sighting("6", conv="c2", minute=2, author="bot", ownership_state="ai_owned"),
    )
    rep = m.replies(msgs)
    share = m.author_share(rep).set_index("value")
    assert share["count"].to_dict() == {"agent": 3, "human": 1, "bot": 1}
    conv = m.conversations(rep).set_index("conversation")
    assert conv.loc[
        "c1", ["human_replies", "suppressed_turns", "handoffs_to_human", "handbacks_to_agent"]
    ].tolist() == [1, 1, 1, 1]
    assert conv.loc["c2", ["human_replies", "handoffs_to_human"]].tolist() == [0, 0]
    authors = build_report(frames(msgs))["authors"]
    assert (authors["replies_with_author"], authors["by_author"], authors["human_share"]) == (
        5,
        {"agent": 3, "human": 1, "bot": 1},
        0.2,
    )
    assert (authors["conversations"], authors["conversations_with_human"], authors["suppressed_turns"]) == (
        2,
        1,
        1,
    )


def test_routine_instances_restart_after_a_terminal_status() -> None:
    msgs = messages(
        sighting("1", minute=0, **routine("book_table", "active")),
        sighting("2", minute=1, **routine("book_table", "waiting_for_input", "date", "partySize")),
        sighting("3", minute=2, **routine("book_table", "waiting_for_input", "partySize")),
        sighting("4", minute=3, **routine("book_table", "abandoned")),
        sighting("5", minute=4, **routine("book_table", "active")),  # a new instance
        sighting("6", minute=6, **routine("book_table", "completed")),
        sighting("7", minute=7, **routine("book_table", "active")),  # a third, still open
        sighting("8", minute=8, conv="c2", **routine("refund", "waiting_for_input", "order")),
    )
    inst = m.routine_instances(m.replies(msgs))
    assert inst[["conversation", "routine", "instance", "outcome", "turns"]].values.tolist() == [
        ["c1", "book_table", 1, "abandoned", 4],
        ["c1", "book_table", 2, "completed", 2],
        ["c1", "book_table", 3, "open", 1],
        ["c2", "refund", 1, "open", 1],
    ]
    assert inst["abandoned_at"].tolist()[0] == ["partySize"]  # open at the last status before abandonment
    assert inst["seconds"].tolist()[:2] == [180.0, 120.0]
    summary = m.routine_summary(inst).set_index("routine")
    assert summary.loc["book_table", ["completed", "abandoned", "open"]].tolist() == [1, 1, 1]
    assert summary.loc["book_table", "abandonment_rate"] == 0.5
    assert pd.isna(summary.loc["refund", "abandonment_rate"])  # nothing closed: no rate
    slots = m.abandoned_slots(inst)
    assert slots.values.tolist() == [["book_table", "partySize", 1]]


def test_stale_open_instances() -> None:
    msgs = messages(
        sighting("1", conv="idle", minute=0, **routine("refund", "waiting_for_input", "order")),
        sighting("2", conv="busy", minute=50, **routine("refund", "active")),
        sighting("3", conv="x", minute=60, **covered("answered")),
    )
    inst = m.routine_instances(m.replies(msgs), stale_after=pd.Timedelta("30min"))
    assert inst.set_index("conversation")["stale"].to_dict() == {"busy": False, "idle": True}
    report = build_report(frames(msgs), stale_after=pd.Timedelta("30min"))["routines"]
    assert (report["open"], report["stale"], report["abandonment_rate"]) == (2, 1, None)


def test_invocations_per_tool_with_unknown_outcomes() -> None:
    msgs = messages(
        sighting("1", invocation_tool_name="book_table", invocation_outcome="started"),
        sighting("2", invocation_tool_name="book_table", invocation_outcome="started"),
        sighting("3", invocation_tool_name="book_table", invocation_outcome="declined"),
        sighting("4", invocation_tool_name="nope", invocation_outcome="unknown_tool"),
        sighting("5", invocation_tool_name="x", invocation_outcome="exploded"),
    )
    inv = m.invocation_outcomes(m.replies(msgs))
    assert inv.values.tolist() == [
        ["book_table", "declined", 1],
        ["book_table", "started", 2],
        ["nope", "unknown_tool", 1],
        ["x", "exploded", 1],
    ]
    by = build_report(frames(msgs))["invocations"]["by_outcome"]
    assert by == {
        "declined": 1,
        "not_started": 0,
        "reentered": 0,
        "started": 2,
        "unknown_tool": 1,
        "exploded": 1,
    }


def test_citations_uncited_answered_turns_and_most_cited() -> None:
    def cite(*docs: str) -> list[dict]:
        return [{"document_id": d, "chunk_id": "c", "title": d.upper(), "source_url": None} for d in docs]

    msgs = messages(
        sighting("1", **covered("answered"), citations=cite("returns", "shipping"), citation_count=2),
        sighting("1", minute=3, **covered("answered"), citations=cite("returns", "shipping"), citation_count=2),
        sighting("2", **covered("answered"), citations=cite("returns", "returns"), citation_count=2),
        sighting("3", **covered("answered"), citations=[], citation_count=0),
        sighting("4", **covered("partial", "insufficient_evidence")),
    )
    rep = m.replies(msgs)
    summary = m.citation_summary(m.turns(rep))
    assert (summary["answered_turns"], summary["answered_without_citation"], summary["share"]) == (
        3,
        1,
        1 / 3,
    )
    assert m.most_cited(rep).values.tolist() == [["returns", "RETURNS", 2], ["shipping", "SHIPPING", 1]]


def test_empty_and_unenveloped_datasets_give_a_report_with_notes() -> None:
    empty = build_report(frames(messages()))
    assert empty["coverage"]["turns_assessed"] == 0
    assert empty["coverage"]["by_coverage"]["answered"]["share"] is None
    assert empty["routines"]["abandonment_rate"] is None
    assert empty["dataset"]["notes"] == ["no agent messages in the selected window"]
    plain = build_report(frames(messages(sighting("1", has_envelope=False))))
    assert plain["dataset"]["notes"] == [
        "no agent message carried the converse envelope: did the clients send A2A-Extensions?"
    ]


def test_groups_by_agent_and_day() -> None:
    msgs = messages(
        sighting("1", agent="ag_a", minute=0, **covered("answered")),
        sighting("2", agent="ag_b", minute=60 * 24, **covered("unanswered", "insufficient_evidence")),
    )
    groups = build_report(frames(msgs), by=("agent", "day"))["groups"]
    assert groups["agent"]["ag_a"]["coverage"]["by_coverage"]["answered"]["count"] == 1
    assert groups["agent"]["ag_b"]["coverage"]["by_coverage"]["unanswered"]["count"] == 1
    assert sorted(groups["day"]) == ["2026-12-01", "2026-12-02"]


def test_a_window_never_opens_the_partitions_it_excludes(tmp_path: Path) -> None:
    from converse_tap.analysis.engine import Engine
    from converse_tap.analysis.load import Window, parse_when
    from converse_tap.store.files import write_parquet
    from converse_tap.store.schema import TABLES

    for day, mid in (("2026-12-01", "early"), ("2026-12-02", "late")):
        row = sighting(mid, minute=0, **covered("answered"))
        row.update(ts=pd.Timestamp(f"{day}T09:00:00Z"), object_kind="message", direction="response")
        row.update(location="result.message", agent_url="http://agent.test/", binding="jsonrpc", dialect="v1.0")
        row.update(method="SendMessage")
        schema = TABLES["messages"]
        table = pa.Table.from_pylist([{f.name: row.get(f.name) for f in schema}], schema=schema)
        write_parquet(tmp_path, "messages", table, f"part-{mid}")
    early = next((tmp_path / "messages").glob("date=2026-12-01/*.parquet"))
    early.write_bytes(b"not parquet at all")  # a file the window must not even open
    since = Window(since=parse_when("2026-12-02"))
    report = build_report(Engine.over_dataset(tmp_path, since))
    assert (report["dataset"]["replies"], report["coverage"]["turns_assessed"]) == (1, 1)
    assert not any("skipped" in n for n in report["dataset"]["notes"])
    whole = build_report(Engine.over_dataset(tmp_path))  # the whole dataset does open it, and says so
    assert whole["dataset"]["replies"] == 1
    assert [n for n in whole["dataset"]["notes"] if "skipped" in n] == [
        f"skipped {early}: not a Parquet file, not a file of this dataset"
    ]


def test_an_engine_leaves_no_spill_directory_behind(tmp_path: Path) -> None:
    from converse_tap.analysis.engine import Engine

    closed = Engine.over_dataset(tmp_path)
    spill = Path(closed.con.sql("SELECT current_setting('temp_directory')").fetchall()[0][0])
    assert spill.is_dir()
    closed.close()
    assert not spill.exists()
    forgotten = Engine.over_dataset(tmp_path)  # as a notebook does: never closed
    spill = Path(forgotten.con.sql("SELECT current_setting('temp_directory')").fetchall()[0][0])
    del forgotten
    assert not spill.exists()


_STATUS = st.sampled_from(["active", "waiting_for_input", "completed", "abandoned"])


@settings(max_examples=12, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a1", "a2"]),
            st.sampled_from(["c1", "c2", "c3"]),
            st.sampled_from(["book", "refund"]),
            _STATUS,
            st.lists(st.sampled_from(["date", "order"]), max_size=2),
            st.integers(0, 3000),
        ),
        max_size=30,
    ),
    st.sampled_from([None, "10min", "24h"]),
)
def test_routines_counted_in_sql_are_the_per_instance_metrics(rows: list, stale: str | None) -> None:
    """The report counts routine instances in SQL per grouping key; the per-instance frame and its pandas
    summaries (`routine_instances`, `routine_summary`, `abandoned_slots`) are the reference."""
    msgs = messages(
        *(
            sighting(str(i), conv=conv, agent=agent, minute=minute, **routine(name, status, *slots))
            for i, (agent, conv, name, status, slots, minute) in enumerate(rows)
        )
    )
    stale_after = pd.Timedelta(stale) if stale else None
    inst = m.routine_instances(m.replies(msgs), stale_after=stale_after)
    report = build_report(frames(msgs), by=("agent", "day", "routine"), stale_after=stale_after)

    def expected(part: pd.DataFrame) -> dict:
        totals = m.routine_totals(part)
        by_routine = m.routine_summary(part).to_dict("records")
        if stale_after is None:
            by_routine = [{k: v for k, v in r.items() if k != "stale"} for r in by_routine]
        return {
            "counts": [totals[k] for k in ("instances", "completed", "abandoned", "open")],
            "stale": totals["stale"] if stale_after is not None else None,
            "medians": [totals["median_turns"], totals["median_seconds"]],
            "by_routine": by_routine,
            "slots": m.abandoned_slots(part).values.tolist(),
        }

    def got(section: dict) -> dict:
        return {
            "counts": [section[k] for k in ("instances", "completed", "abandoned", "open")],
            "stale": section["stale"],
            "medians": [section["median_turns"], section["median_seconds"]],
            "by_routine": section["by_routine"],
            "slots": [[r["routine"], r["slot"], r["abandoned"]] for r in section["abandoned_at"]],
        }

    def plain(x: Any) -> Any:  # numpy scalars as Python ones, NaN as None
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        if isinstance(x, list):
            return [plain(v) for v in x]
        x = x.item() if hasattr(x, "item") else x
        return None if isinstance(x, float) and math.isnan(x) else x

    def same(a: dict, b: dict) -> bool:
        return plain(a) == plain(b)

    assert same(got(report["routines"]), expected(inst))
    day = inst["started"].dt.strftime("%Y-%m-%d") if len(inst) else pd.Series(dtype=object)
    for by, keys in (("agent", inst.get("agent")), ("routine", inst.get("routine")), ("day", day)):
        for key in sorted(set(keys)) if keys is not None else []:
            assert same(got(report["groups"][by][key]["routines"]), expected(inst[keys == key]))


_OWNER = st.sampled_from([None, "ai_owned", "human_owned", "shared"])  # an unknown state too


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a1", "a2", None]), st.sampled_from(["c1", "c2", "c3"]), _OWNER, st.integers(0, 6)),
        max_size=25,
    )
)
@example(
    [(None, "c1", "ai_owned", 1), (None, "c1", None, 2), (None, "c1", "human_owned", 2), ("a1", "c1", "ai_owned", 3)]
)
def test_ownership_changes_are_those_of_each_conversations_replies_in_order(rows: list) -> None:
    """Hand-offs and hand-backs, read off each conversation's replies in first-sighting order (ties in one minute
    by their place in the data; a reply stating no state skipped) — the definition of docs/metrics.md, in Python —
    equal what the SQL counts, which runs its ordered window only over conversations stating two states."""
    msgs = messages(
        *(
            sighting(str(i), conv=conv, agent=agent, minute=minute, ownership_state=state)
            for i, (agent, conv, state, minute) in enumerate(rows)
        )
    )
    rep = m.replies(msgs)
    expected: dict[tuple[Any, str], list[int]] = {}
    order = sorted(range(len(rows)), key=lambda i: (rows[i][3], i))  # one sighting per reply: its row is its place
    last: dict[tuple[Any, str], str] = {}
    for i in order:
        agent, conv, state, _ = rows[i]
        counts = expected.setdefault((agent, conv), [0, 0])
        before = last.get((agent, conv))
        if state is not None:
            counts[0] += before == "ai_owned" and state == "human_owned"
            counts[1] += before == "human_owned" and state == "ai_owned"
            last[(agent, conv)] = state
    got = {
        (None if pd.isna(r.agent) else r.agent, r.conversation): [r.handoffs_to_human, r.handbacks_to_agent]
        for r in m.conversations(rep).itertuples()
    }
    assert got == expected
