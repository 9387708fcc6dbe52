"""One conversation as a transcript: each message once, in order, with each reply's envelope inline.

Messages belong to a conversation as replies do (`engine.CONVERSATION_KEY`: context, else task, else exchange).
A message seen several times (polls, history, resubscriptions) appears once, at its first sighting, with the
values of its last; a reply's envelope is the `replies` view's row, so a transcript shows what the report counted.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import Any

from ..a2a.redact import TextPolicy
from ..store.files import SALT_FILE, read_small
from ..textsafe import safe_line, safe_text
from .drill import AGENT_SIDE
from .engine import CONVERSATION_KEY, Engine
from .sqlout import plain, pylist

TRANSCRIPT_SCHEMA = "converse-tap-transcript/1"
_HASHED = re.compile(r"sha256:[0-9a-f]{64}")  # text a dataset recorded with `--text hash` holds

# Whose a message is, as the `replies` view has it: the agent's when it is seen in a response and not in the
# user's role (a reply, an artifact, an agent message of a task's history), else the client's (a request's message,
# whatever role it claims; a user message a task's history repeats). A message is one per conversation, agent,
# side and id: a client message reusing a reply's id, or another agent's reply with the same id, is a message of
# its own and changes nothing of the reply's.
_SIDE = f"CASE WHEN {AGENT_SIDE} THEN 'agent' ELSE 'client' END"

_MESSAGES = f"""
SELECT m.* EXCLUDE (exchange_order, seq_order, agent_key), e.trace_id, e.span_id FROM (
SELECT {CONVERSATION_KEY} AS conversation,
       coalesce(message_id, 'sighting:' || exchange_id || ':' || seq) AS key,
       {_SIDE} AS side,
       agent AS agent_key,
       min(ts) AS first_at,
       first(exchange_id ORDER BY ts, seq) AS exchange_id,
       min(exchange_id) AS exchange_order,
       min(seq) AS seq_order,
       last(message_id ORDER BY ts, seq) AS message_id,
       last(object_kind::VARCHAR ORDER BY ts, seq) AS kind,
       last(role::VARCHAR ORDER BY ts, seq) AS role,
       last(agent ORDER BY ts, seq) AS agent,
       last(task_id ORDER BY ts, seq) AS task_id,
       last(task_state::VARCHAR ORDER BY ts, seq) AS task_state,
       last(method::VARCHAR ORDER BY ts, seq) AS method,
       last(artifact_name ORDER BY ts, seq) AS artifact_name,
       last(text ORDER BY ts, seq) AS text,
       last(part_kinds ORDER BY ts, seq) AS part_kinds,
       count(*) AS sightings
FROM messages WHERE {CONVERSATION_KEY} IN (SELECT unnest($1::VARCHAR[]))
GROUP BY 1, 2, 3, 4
) m LEFT JOIN (
    SELECT exchange_id, any_value(trace_id) AS trace_id, any_value(span_id) AS span_id FROM exchanges
    GROUP BY exchange_id
) e USING (exchange_id)
ORDER BY m.conversation, m.first_at NULLS LAST, m.exchange_order, m.seq_order
"""


class UnknownConversation(LookupError):
    """No conversation has that id, and it is no unique prefix of one: `close` names some that are like it (when
    `several`, conversations it starts, of which there is more than one)."""

    def __init__(self, conversation: str, close: list[str], several: bool = False) -> None:
        self.conversation, self.close = conversation, close
        named = ", ".join(safe_line(c) for c in close)
        if several:
            super().__init__(f"'{safe_line(conversation)}' starts several conversations ({named}, …): give more of it")
            return
        hint = f"; did you mean {named}?" if close else ""
        super().__init__(f"no conversation {conversation!r} in the dataset{hint}")


def close_matches(engine: Engine, conversation: str, n: int = 5) -> list[str]:
    """The `n` conversation ids closest in spelling to the one given (edit distance of their first 256
    characters; ties in order), among all of the dataset's."""
    rows = engine.con.execute(
        f"""SELECT c FROM (SELECT DISTINCT {CONVERSATION_KEY} AS c FROM messages) WHERE c IS NOT NULL
            ORDER BY levenshtein(left(c, 256), left(?, 256)), c LIMIT {int(n)}""",
        [conversation],
    ).fetchall()
    return [r[0] for r in rows]


def _hasher(root: str, mode: str) -> TextPolicy:
    """The dataset's hash policy; OSError when its salt is not a salt (a FIFO, a huge file). A dataset without a
    salt (recorded with `--text keep`, or on object storage) gets a random one for this output: an unsalted SHA-256
    of a short text ("yes", a PIN) is looked up in a table, which is not sharing safely; equal texts still hash
    equal within the output."""
    salt = read_small(Path(root) / SALT_FILE, "salt") if mode == "hash" and root else None
    if mode == "hash" and not salt:
        salt = secrets.token_hex(16).encode()
    return TextPolicy(mode, salt or b"")


def transcript(engine: Engine, conversation: str, text: str = "keep") -> dict[str, Any]:
    """{schema, conversation, agents, first_seen, last_seen, messages: [...]}; each message has role, author,
    time, text (hashed with the dataset's salt under text="hash") and, for a reply, its envelope. Raises
    UnknownConversation (with close matches) when no message belongs to it. Needs the named views."""
    found = transcripts(engine, [conversation], text)
    if conversation in found:
        return found[conversation]
    starting = _starting_with(engine, conversation.rstrip("…"))  # an id as examples clip it, or any unique prefix
    if len(starting) == 1:
        return transcripts(engine, starting, text)[starting[0]]
    if starting:
        raise UnknownConversation(conversation, starting, several=True)
    raise UnknownConversation(conversation, close_matches(engine, conversation))


def _starting_with(engine: Engine, prefix: str, n: int = 5) -> list[str]:
    """Up to `n` conversation ids that start with `prefix` (none for an empty one), in order: exactly one means
    the prefix names it."""
    if not prefix:
        return []
    rows = engine.con.execute(
        f"""SELECT DISTINCT {CONVERSATION_KEY} AS c FROM messages WHERE starts_with({CONVERSATION_KEY}, ?)
            ORDER BY c LIMIT {int(n)}""",
        [prefix],
    ).fetchall()
    return [r[0] for r in rows]


def transcripts(engine: Engine, conversations: list[str], text: str = "keep") -> dict[str, dict[str, Any]]:
    """The transcripts of several conversations, read in one pass over the messages (those found)."""
    cursor = engine.con.execute(_MESSAGES, [conversations])
    found = cursor.fetchall()
    columns = [d[0] for d in cursor.description]
    of_these = engine.con.sql(
        "SELECT * FROM replies WHERE conversation IN (SELECT unnest($1::VARCHAR[]))", params=[conversations]
    )
    replies: dict[tuple[str, str | None, str], dict[str, Any]] = {
        (r["conversation"], r["agent"], r["reply_key"]): r for r in pylist(of_these.to_arrow_table())
    }
    policy = _hasher(engine.root, text)
    rows: dict[str, list[dict[str, Any]]] = {}
    for values in found:
        row = dict(zip(columns, values, strict=True))
        rows.setdefault(row["conversation"], []).append(row)
    return {c: _transcript(c, rows[c], replies, policy) for c in conversations if c in rows}


def _transcript(
    conversation: str,
    rows: list[dict[str, Any]],
    replies: dict[tuple[str, str | None, str], dict[str, Any]],
    policy: TextPolicy,
) -> dict[str, Any]:
    messages, owner, n_replies = [], None, 0
    for row in rows:
        body = row["text"]
        if policy.mode == "hash" and body is not None and not _HASHED.fullmatch(body):  # (stored hashed: as is)
            body = policy.apply(body)
        reply = replies.get((conversation, row["agent"], row["key"])) if row["side"] == "agent" else None
        message: dict[str, Any] = {
            "message_id": row["message_id"],
            "kind": row["kind"],
            "role": row["role"],
            "author": reply["author"] if reply else None,
            "at": plain(row["first_at"]),
            "agent": row["agent"],
            "task_id": row["task_id"],
            "task_state": row["task_state"],
            "method": row["method"],
            "text": body,
            "parts": row["part_kinds"] or [],
            "sightings": row["sightings"],
            "trace_id": row["trace_id"],  # of the exchange it was first seen in: joins the user's traces
            "span_id": row["span_id"],
            "envelope": None,
        }
        if row["artifact_name"]:
            message["artifact_name"] = row["artifact_name"]
        if reply:
            n_replies += 1
            message["envelope"] = _envelope(reply, owner)
            owner = reply["ownership_state"] or owner
        messages.append(message)
    agents = sorted({m["agent"] for m in messages if m["agent"]})
    return {
        "schema": TRANSCRIPT_SCHEMA,
        "conversation": conversation,
        "agents": agents,
        "first_seen": messages[0]["at"],
        "last_seen": max((m["at"] for m in messages if m["at"]), default=None),
        "replies": n_replies,
        "messages": messages,
    }


def _envelope(r: dict[str, Any], previous_owner: str | None) -> dict[str, Any]:
    state = r["ownership_state"]
    change = None
    if state is not None and previous_owner is not None and state != previous_owner:
        change = f"{previous_owner} -> {state}"
    return plain(
        {
            "coverage": {
                "availability": r["coverage_availability"],
                "coverage": r["coverage"],
                "reason": r["coverage_reason"],
                "originating_turn_id": r["originating_turn_id"],
            }
            if r["coverage_availability"] or r["coverage"] or r["coverage_reason"]
            else None,
            "ownership": {"state": state, "suppressed": r["ownership_suppressed"], "change": change}
            if state is not None or r["ownership_suppressed"] is not None
            else None,
            "routine": {
                "name": r["routine_name"],
                "tool_name": r["routine_tool_name"],
                "status": r["routine_status"],
                "pending": [
                    {"key": s["key"], "required": s["required"], "description": s["description"]}
                    for s in r["pending_input"] or []
                ],
            }
            if r["routine_status"] or r["routine_name"] or r["routine_tool_name"]
            else None,
            "invocation": {"tool_name": r["invocation_tool_name"], "outcome": r["invocation_outcome"]}
            if r["invocation_tool_name"] or r["invocation_outcome"]
            else None,
            "citations": [
                {"document_id": c["document_id"], "title": c["title"], "source_url": c["source_url"]}
                for c in r["citations"] or []
            ],
        }
    )


def envelope_lines(env: dict[str, Any]) -> list[str]:
    """The envelope of a reply, one line per part that is present."""
    out = []
    cov = env.get("coverage")
    if cov:
        verdict = " / ".join(str(v) for v in (cov["availability"], cov["coverage"], cov["reason"]) if v)
        turn = f" (turn {cov['originating_turn_id']})" if cov.get("originating_turn_id") else ""
        out.append(f"coverage: {verdict}{turn}")
    own = env.get("ownership")
    if own:
        parts = [str(own["state"])] if own["state"] else []
        if own["suppressed"]:
            parts.append("suppressed")
        if own["change"]:
            parts.append(f"changed {own['change']}")
        out.append("ownership: " + ", ".join(parts))
    rout = env.get("routine")
    if rout:
        name = rout["name"] or rout["tool_name"] or "?"
        pending = ", ".join(s["key"] + ("*" if s["required"] else "") for s in rout["pending"])
        out.append(f"routine: {name} {rout['status'] or ''}".rstrip() + (f" (pending {pending})" if pending else ""))
    inv = env.get("invocation")
    if inv:
        out.append(f"invocation: {inv['tool_name'] or '?'} {inv['outcome'] or ''}".rstrip())
    if env.get("citations"):
        out.append("citations: " + "; ".join(c["title"] or c["document_id"] or "?" for c in env["citations"]))
    return out


def transcript_text(t: dict[str, Any]) -> str:
    """A transcript for reading: a header, then each message (further lines of its text marked `    | `) with its
    envelope indented below it."""
    lines = [
        safe_line(
            f"conversation {t['conversation']}  agent {', '.join(t['agents']) or '–'}  {len(t['messages'])} "
            f"messages, {t['replies']} replies  {t['first_seen'] or '–'} to {t['last_seen'] or '–'}"
        ),
        "",
    ]
    for m in t["messages"]:
        who = m["role"] or m["kind"] or "?"
        if m["author"]:
            who += f" (by {m['author']})"
        if m["kind"] == "artifact":
            who = "artifact" + (f" {m['artifact_name']}" if m.get("artifact_name") else "")
        at = m["at"] or ""  # ISO 8601: milliseconds when it has a fraction (isoformat leaves out .000000)
        when = (at[:19] + (at[19:23] if at[19:20] == "." else "")).replace("T", " ")
        # the text keeps its line breaks, each further line marked as the text's (`    | `), so that no line of it
        # reads as an envelope or trace line; nothing else from the wire may break a line
        body = safe_text(m["text"]).replace("\n", "\n    | ") if m["text"] is not None else "(no text)"
        lines.append(f"{safe_line(f'[{when}] {who}')}: {body}")
        if m.get("trace_id"):
            lines.append(safe_line(f"    trace {m['trace_id']} span {m['span_id']}"))
        for line in envelope_lines(m["envelope"] or {}):
            lines.append(f"    {safe_line(line)}")
    return "\n".join(lines) + "\n"
