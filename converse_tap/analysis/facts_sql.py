"""The SQL of the facts in docs/metrics.md: sightings -> replies -> turns, conversations and routine instances,
defined here once and run by `engine.Engine` (DuckDB) over a dataset or frames.

The text keeps to standard SQL (window functions, aggregates with FILTER, joins) so that it can be transpiled to
other engines; what is DuckDB's own is named where it is used: `epoch_us` and the 128-bit sort key (`SORT_KEY`),
`arg_min`/`arg_max` (two arguments), and the list lambdas of `INSTANCES` (`abandoned_at`).
"""

from __future__ import annotations

from ..a2a.constants import PUSH_AGENT, PUSH_BINDING, TERMINAL_ROUTINE_STATUSES

NONE = "(none)"  # the key under which a missing value is counted
# the conversation a message belongs to, as REPLIES computes it for replies (tests check the two agree)
CONVERSATION_KEY = "coalesce(context_id, task_id, 'exchange:' || exchange_id)"

# Sightings are ordered by time, then by their position in the dataset (`pos`: file, then row; rows of one
# exchange are written in order), so "first" and "last" sighting are exact even within one microsecond. The two
# pack into one 128-bit sort key, which keeps the aggregates below scalar (no sort of whole rows): the time times
# 2**64 plus the position, not the time shifted left, which DuckDB refuses for a time before 1970 (negative).
_NO_TIME = 9223372036854775807  # a sighting without a time sorts last
_LOW64 = "18446744073709551615::HUGEINT"
_HIGH = "18446744073709551616::HUGEINT"  # 2**64: any BIGINT time by it, plus a position, fits a HUGEINT
SORT_KEY = f"((coalesce(epoch_us({{ts}}), {_NO_TIME})::HUGEINT * {_HIGH}) + {{pos}})"
# replies in first-sighting order; first_pos (the position of the first sighting) is unique per reply
ORDER = "first_seen ASC NULLS LAST, first_pos ASC"

# the columns of a reply: its last sighting's values, plus when and where it was first seen
REPLY_VALUES = [
    "agent", "message_id", "context_id", "task_id", "author", "coverage_availability", "coverage",
    "coverage_reason", "originating_turn_id", "ownership_state", "ownership_suppressed", "routine_tool_name",
    "routine_name", "routine_status", "pending_input", "invocation_tool_name", "invocation_outcome", "citations",
    "citation_count",
]  # fmt: skip
REPLY_COLUMNS = ["reply_key", "conversation", "first_seen", "first_pos", "ts", "exchange_id", *REPLY_VALUES]
# what the facts read: the table `replies` holds these (and `last_pos`, where its last sighting is); the other
# columns of a reply are fetched from that sighting only when a caller asks for whole replies
DETAIL_COLUMNS = ["ts", "exchange_id", "message_id", "context_id", "task_id"]
FACT_COLUMNS = [c for c in REPLY_COLUMNS if c not in DETAIL_COLUMNS]
_TERMINAL = ", ".join(f"'{s}'" for s in sorted(TERMINAL_ROUTINE_STATUSES))

REPLY_KEY = "coalesce(message_id, 'sighting:' || exchange_id || ':' || seq)"
FIRST_SK = SORT_KEY.format(ts="first_seen", pos="first_pos")  # a reply's first sighting as one sort key


# A push delivery's sightings carry the agent key PUSH_AGENT (the recorder saw only the client's webhook): they are
# the agent's whose sightings or calls elsewhere hold their task (a SendMessage answered with the task, submitted,
# as a client asking for push gets it), when exactly one agent's do (else they keep PUSH_AGENT), so
# that a reply delivered by push and then polled is one reply, of its agent. Only the pushed rows are joined; the
# others pass through, their keys unchanged (docs/metrics.md, "Push deliveries").
_PUSHED = f"agent = '{PUSH_AGENT}'"
# Exchanges that are no client's call to an agent: a card fetch, and an agent's push delivery to a client's webhook.
# Neither counts among the calls that could have asked for the extension, nor makes an agent of the dataset.
NOT_CALLS = ("card", PUSH_BINDING)
CLIENT_CALL = f"binding IS NULL OR binding NOT IN ({', '.join(repr(b) for b in NOT_CALLS)})"


def push_owners_sql(sightings: str = "sightings", exchanges: str = "exchanges") -> str:
    """The agent of each pushed task (`task_id`, `owner`): the one agent whose sightings or calls hold it. Every
    engine defines the relation `push_owners` ATTRIBUTED reads: this over its own `sightings` and `exchanges`, or,
    under an agent filter, over every agent's rows in the window (agent_filter.py: a task two agents hold, one of
    them outside the filter, is no one's). The pushed tasks are those of the deliveries' sightings and of the
    deliveries themselves: a delivery that carried no agent message (a status update without one, an artifact) is
    its task's agent's too, as `--agent` selects exchanges by their attributed agent."""
    pushed = f"SELECT task_id FROM {sightings} WHERE {_PUSHED} UNION SELECT task_id FROM {exchanges} WHERE {_PUSHED}"
    return f"""
SELECT task_id, min(agent) AS owner FROM (
    SELECT task_id, agent FROM {sightings}
    WHERE agent IS DISTINCT FROM '{PUSH_AGENT}' AND agent IS NOT NULL AND task_id IN ({pushed})
    UNION ALL
    SELECT task_id, agent FROM {exchanges}
    WHERE ({CLIENT_CALL}) AND agent IS DISTINCT FROM '{PUSH_AGENT}' AND agent IS NOT NULL AND task_id IN ({pushed})
) GROUP BY task_id HAVING count(DISTINCT agent) = 1
"""


ATTRIBUTED = f"""(
    SELECT agent, message_id, exchange_id, seq, has_envelope, ts, pos, FALSE AS pushed FROM sightings
    WHERE agent IS DISTINCT FROM '{PUSH_AGENT}'
    UNION ALL
    SELECT coalesce(o.owner, s.agent) AS agent, s.message_id, s.exchange_id, s.seq, s.has_envelope, s.ts, s.pos,
           TRUE AS pushed
    FROM (SELECT * FROM sightings WHERE {_PUSHED}) s LEFT JOIN push_owners o ON s.task_id = o.task_id
)"""


# One pass over the agent messages: per distinct message (its agent and id: another agent's message with the same
# id is another reply), whether any sighting carried the envelope (adoption), and of its sightings with the
# envelope the first (time and position) and the last (position). A push delivery's are its task's agent's
# (ATTRIBUTED): `owner` is the agent of a key that has one (null for the others), which its reply takes.
def keys_sql(part: int = 0, parts: int = 1) -> str:
    """The keys above, or those of one hash partition of them (`hash` is DuckDB's, on the engine that
    partitions): every sighting of a key lands in the same partition, so the partitions' keys are the keys."""
    where = f" WHERE hash({REPLY_KEY}) % {int(parts)} = {int(part)}" if parts > 1 else ""
    return f"""
SELECT CASE WHEN bool_or(pushed) THEN agent END AS owner, bool_or(coalesce(has_envelope, false)) AS carried,
       min(ts) FILTER (WHERE has_envelope) AS first_seen,
       (min({SORT_KEY.format(ts="ts", pos="pos")}) FILTER (WHERE has_envelope) & {_LOW64})::BIGINT AS first_pos,
       (max({SORT_KEY.format(ts="ts", pos="pos")}) FILTER (WHERE has_envelope) & {_LOW64})::BIGINT AS last_pos
FROM {ATTRIBUTED}{where} GROUP BY agent, {REPLY_KEY}
"""


KEYS = keys_sql()


def replies_sql(source: str = "sightings", low: int | None = None, high: int | None = None) -> str:
    """The replies whose last sighting is in `source` (a part of the sightings holding the positions
    `low` <= pos < `high`): built part by part, each join's hash table holds the keys of one part only."""
    bounds = "".join(f" AND k.last_pos {op} {int(v)}" for op, v in ((">=", low), ("<", high)) if v is not None)
    return f"""
SELECT {REPLY_KEY} AS reply_key, coalesce(context_id, task_id, 'exchange:' || exchange_id) AS conversation,
       k.first_seen, k.first_pos, k.last_pos, coalesce(k.owner, s.agent) AS agent,
       {", ".join(c for c in REPLY_VALUES if c not in (*DETAIL_COLUMNS, "agent"))}
FROM {source} s JOIN (SELECT * FROM message_keys k WHERE carried{bounds}) k ON s.pos = k.last_pos
"""


REPLIES = replies_sql()

# the turn of each reply that carries answerCoverage, and whether its verdict is the turn's last one
TURN_ID = "coalesce(originating_turn_id, reply_key)"
HAS_VERDICT = """(coverage_availability IS NOT NULL OR coverage IS NOT NULL OR coverage_reason IS NOT NULL
       OR originating_turn_id IS NOT NULL)"""
LAST_VERDICTS = f"""
SELECT (max({FIRST_SK}) & {_LOW64})::BIGINT AS first_pos FROM replies WHERE {HAS_VERDICT}
GROUP BY agent, {TURN_ID}
"""
TURNS = f"SELECT r.*, {TURN_ID} AS turn_id FROM replies r SEMI JOIN last_verdicts USING (first_pos)"


def value_key_sql(column: str) -> str:
    """`metrics.value_key` in SQL: NONE for NULL, a value starting with ( or " quoted, any other as it is: a wire
    value spelled `(none)` is not counted with the missing ones."""
    quoted = f"""'"' || replace(replace({column}, '\\', '\\\\'), '"', '\\"') || '"'"""
    return f"""CASE WHEN {column} IS NULL THEN '{NONE}' WHEN left({column}, 1) IN ('(', '"') THEN {quoted}
                ELSE {column} END"""


AGENT = value_key_sql("agent")
DAY = f"coalesce(strftime(first_seen, '%Y-%m-%d'), '{NONE}')"
# to count by day, rows are grouped by the date (four bytes) and only the groups' dates are written out as text
DATE = "first_seen::DATE"
DATE_TEXT = f"coalesce(strftime(day, '%Y-%m-%d'), '{NONE}') AS day"
ROUTINE = value_key_sql("coalesce(routine_name, routine_tool_name)")
GROUP_KEYS = {"all": "'all'", "agent": AGENT, "day": DAY, "routine": ROUTINE}


# (a hostile dataset can hold rows without an agent or an exchange id: NULL keys are one group, as GROUP BY has them)
_SAME_CONVERSATION = " AND ".join(f"{{a}}.{k} IS NOT DISTINCT FROM {{b}}.{k}" for k in ("g", "agent", "conversation"))


def conversations_sql(group: str = "'all'") -> str:
    """Per conversation (within a group key `g`): replies, human replies, suppressed turns, ownership changes.

    An ownership change is a reply whose state differs from the last state stated before it (replies in order).
    Only conversations that state two different states can have one: the ordered window runs over their replies
    that state one, not over every reply (most conversations never change hands; 2-3x less time for the report's
    conversations over 10M rows when few do, the same when all do: performance.md, section 1i)."""
    return f"""
WITH c AS (
    SELECT {group} AS g, agent, conversation, count(*) AS replies,
           count(*) FILTER (WHERE author = 'human') AS human_replies,
           count(*) FILTER (WHERE ownership_suppressed) AS suppressed_turns,
           min(ownership_state) <> max(ownership_state) AS changes,
           min(first_seen) AS first_seen, max(first_seen) AS last_seen
    FROM replies GROUP BY {group}, agent, conversation
), h AS (
    SELECT g, agent, conversation,
           count(*) FILTER (WHERE prev_owner = 'ai_owned' AND ownership_state = 'human_owned') AS handoffs_to_human,
           count(*) FILTER (WHERE prev_owner = 'human_owned' AND ownership_state = 'ai_owned') AS handbacks_to_agent
    FROM (
        SELECT g, agent, conversation, ownership_state,
               lag(ownership_state) OVER (PARTITION BY g, agent, conversation ORDER BY {ORDER}) AS prev_owner
        FROM (SELECT {group} AS g, agent, conversation, ownership_state, first_seen, first_pos FROM replies
              WHERE ownership_state IS NOT NULL) r
        SEMI JOIN (SELECT g, agent, conversation FROM c WHERE changes) x ON {_SAME_CONVERSATION.format(a="r", b="x")}
    )
    GROUP BY g, agent, conversation
)
SELECT c.g, c.agent, c.conversation, c.replies, c.human_replies, c.suppressed_turns,
       coalesce(h.handoffs_to_human, 0) AS handoffs_to_human,
       coalesce(h.handbacks_to_agent, 0) AS handbacks_to_agent, c.first_seen, c.last_seen
FROM c LEFT JOIN h ON {_SAME_CONVERSATION.format(a="c", b="h")}
"""


def conversation_summary_sql(group: str = "'all'") -> str:
    """Per key `g` of a grouping: conversations, those with a human reply, suppressed turns, hand-offs and
    hand-backs."""
    return f"""
SELECT g AS key, count(*) AS conversations,
       count(*) FILTER (WHERE human_replies > 0) AS conversations_with_human,
       sum(suppressed_turns)::BIGINT AS suppressed_turns,
       sum(handoffs_to_human)::BIGINT AS handoffs_to_human,
       sum(handbacks_to_agent)::BIGINT AS handbacks_to_agent
FROM ({conversations_sql(group)}) GROUP BY g
"""


# turns by agent, day, routine, coverage fields and whether cited (`citation_count` 0/1); replies by agent, day,
# routine, author and invocation
TURN_COUNTS = f"""
SELECT agent, {DATE_TEXT}, routine, coverage_availability, coverage, coverage_reason, citation_count, n
FROM (SELECT {AGENT} AS agent, {DATE} AS day, {ROUTINE} AS routine,
             coverage_availability, coverage, coverage_reason,
             (coalesce(citation_count, 0) > 0)::INTEGER AS citation_count, count(*) AS n
      FROM turns GROUP BY ALL)
"""
REPLY_COUNTS = f"""
SELECT agent, {DATE_TEXT}, routine, author, invocation_tool_name, invocation_outcome, n
FROM (SELECT {AGENT} AS agent, {DATE} AS day, {ROUTINE} AS routine, author,
             invocation_tool_name, invocation_outcome, count(*) AS n
      FROM replies GROUP BY ALL)
"""


# Routine instances: the ordered window runs over narrow rows (keys, times, statuses), not over the slots lists a
# reply may hold (thousands, from the wire): the window's sort carried each reply's list, and spilled with them. The
# list an abandoned instance needs, the one of the status before its last, is joined back by that reply's position.
INSTANCES = f"""
WITH statuses AS (
    SELECT agent, conversation, first_seen, first_pos, routine_tool_name, routine_status,
           {value_key_sql("coalesce(routine_name, routine_tool_name)")} AS routine FROM replies
    WHERE routine_status IS NOT NULL AND coalesce(routine_name, routine_tool_name) IS NOT NULL
), paired AS (
    -- one window: the instance is 1 + the terminal statuses before this one; the status before this one is in
    -- the same instance unless it was terminal
    SELECT *, 1 + coalesce(sum(CASE WHEN routine_status IN ({_TERMINAL}) THEN 1 ELSE 0 END) OVER (
        PARTITION BY agent, conversation, routine ORDER BY {ORDER}
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS instance,
        CASE WHEN lag(routine_status) OVER (PARTITION BY agent, conversation, routine ORDER BY {ORDER})
                  IN ({_TERMINAL}) THEN NULL
             ELSE lag(first_pos) OVER (PARTITION BY agent, conversation, routine ORDER BY {ORDER}) END
        AS prev_pos, {FIRST_SK} AS sk
    FROM statuses
), instances AS (
    SELECT agent, conversation, routine, instance,
           arg_min(routine_tool_name, sk) AS tool_name,
           count(*) AS turns,
           min(first_seen) AS started,
           -- the time of the last status (none when it has none: an untimed sighting is ordered last), not the
           -- latest time among them: an instance ended by an untimed status has no known duration or idle time
           arg_max_null(first_seen, sk) AS last_seen,
           arg_max(routine_status, sk) AS last_status,
           arg_max_null(prev_pos, sk) AS prev_pos
    FROM paired
    GROUP BY agent, conversation, routine, instance
)
SELECT i.agent, i.conversation, i.routine, i.instance, i.tool_name, i.turns, i.started, i.last_seen, i.last_status,
       -- of an abandoned instance: the required slots still pending at the status before the abandonment
       CASE WHEN i.last_status = 'abandoned' THEN coalesce(list_transform(
           list_filter(p.pending_input, lambda slot: slot.required),
           lambda slot: {value_key_sql("slot.key")}), []) END AS abandoned_at
FROM instances i
LEFT JOIN (SELECT first_pos, pending_input FROM replies WHERE pending_input IS NOT NULL) p
    ON p.first_pos = CASE WHEN i.last_status = 'abandoned' THEN i.prev_pos END
ORDER BY i.agent, i.conversation, i.routine, i.instance
"""

CITED = f"""
SELECT {AGENT} AS agent, {DAY} AS day, {ROUTINE} AS routine, document_id, count(*) AS replies
FROM (SELECT DISTINCT reply_key, agent, first_seen, routine_name, routine_tool_name,
             {value_key_sql("c.document_id")} AS document_id
      FROM replies, unnest(citations) AS t(c))
GROUP BY ALL
"""

CITED_TITLES = f"""
SELECT {value_key_sql("c.document_id")} AS document_id,
       arg_max(c.title, {FIRST_SK}) AS title
FROM replies, unnest(citations) AS t(c)
GROUP BY 1
"""

ANOMALIES = f"""
SELECT tbl AS "table", split_part(anomaly, ':', 1) AS code, count(*) AS count, min(anomaly) AS example
FROM (
    SELECT DISTINCT 'exchanges' AS tbl, NULL::VARCHAR AS agent, exchange_id AS k, a AS anomaly
    FROM (SELECT * FROM exchanges WHERE len(anomalies) > 0), unnest(anomalies) AS t(a)
    UNION ALL
    SELECT DISTINCT 'messages', agent, coalesce(message_id, exchange_id || ':' || seq), a
    FROM (
        -- a distinct message is its agent's, a delivery's sighting its task's agent's ("Push deliveries"): the
        -- same message delivered by push and polled is one (under an agent filter the views are attributed already)
        SELECT coalesce(o.owner, s.agent) AS agent, s.message_id, s.exchange_id, s.seq, s.anomalies
        FROM (SELECT * FROM sightings WHERE len(anomalies) > 0) s
        LEFT JOIN push_owners o ON s.agent = '{PUSH_AGENT}' AND s.task_id = o.task_id
    ), unnest(anomalies) AS t(a)
    UNION ALL
    SELECT DISTINCT 'agent_cards', agent, ts::VARCHAR, a
    FROM (SELECT * FROM agent_cards WHERE len(anomalies) > 0), unnest(anomalies) AS t(a)
)
WHERE anomaly IS NOT NULL
GROUP BY ALL
ORDER BY count DESC, "table", code
"""


# Routine instances counted per grouping key (`key`, an expression over `instance_facts`) and routine: a routine
# of NULL stands for all routines of the key. Only these small rows reach pandas, however many instances there are.
_OUTCOME = f"CASE WHEN last_status IN ({_TERMINAL}) THEN last_status ELSE 'open' END"
INSTANCE_KEYS = {
    "all": "'all'",
    "agent": AGENT,
    "day": f"coalesce(strftime(started, '%Y-%m-%d'), '{NONE}')",
    "routine": "routine",
}


def _levels(key: str, stale: str) -> str:
    return f"""
WITH i AS (
    SELECT {key} AS key, routine, {_OUTCOME} AS outcome, turns, epoch_us(last_seen) - epoch_us(started) AS us,
           {stale} AS stale, abandoned_at
    FROM instance_facts
), l AS (
    SELECT key, routine, outcome, turns, us, stale FROM i
    UNION ALL
    SELECT key, NULL AS routine, outcome, turns, us, stale FROM i
)"""


def routine_counts_sql(key: str, now_us: int | None, stale_ns: int | None) -> str:
    """Instances by outcome, and open ones idle more than `stale_ns` before `now_us` (epoch microseconds)."""
    stale = "FALSE"
    if now_us is not None and stale_ns is not None:
        # idle µs × 1000 > stale_ns, compared in µs: whole µs exceed stale_ns / 1000 when they exceed its floor, and
        # the nanoseconds of thousands of years (a hostile time) would overflow a BIGINT
        idle_us = f"({int(now_us)} - epoch_us(last_seen))"
        stale = f"(last_status NOT IN ({_TERMINAL}) AND {idle_us} > {int(stale_ns) // 1000})"
    return f"""{_levels(key, stale)}
SELECT key, routine, count(*) AS instances, count(*) FILTER (WHERE outcome = 'completed') AS completed,
       count(*) FILTER (WHERE outcome = 'abandoned') AS abandoned, count(*) FILTER (WHERE outcome = 'open') AS open,
       count(*) FILTER (WHERE stale) AS stale
FROM l GROUP BY key, routine
"""


def routine_middles_sql(key: str) -> str:
    """The middle one or two values of the turns and durations (microseconds) of closed instances, from which a
    median is taken exactly as pandas takes it (the mean of the two middle values)."""
    parts = []
    for measure, column in (("turns", "turns"), ("us", "us")):
        parts.append(f"""
SELECT key, routine, '{measure}' AS measure, value FROM (
    SELECT key, routine, {column} AS value,
           row_number() OVER (PARTITION BY key, routine ORDER BY {column}) AS rn,
           count(*) OVER (PARTITION BY key, routine) AS cnt
    FROM l WHERE outcome <> 'open' AND {column} IS NOT NULL
) WHERE 2 * rn >= cnt AND 2 * rn <= cnt + 2""")
    return _levels(key, "FALSE") + "\nUNION ALL".join(parts)


def abandoned_slots_sql(key: str) -> str:
    """Per key, routine and slot: abandoned instances with that required slot still pending ('(none)' for an
    instance abandoned with none pending)."""
    return f"""{_levels(key, "FALSE")}
SELECT key, routine, slot, count(*) AS abandoned
FROM (SELECT key, routine, CASE WHEN len(abandoned_at) = 0 THEN ['{NONE}'] ELSE abandoned_at END AS slots
      FROM i WHERE outcome = 'abandoned'), unnest(slots) AS t(slot)
GROUP BY key, routine, slot
"""
