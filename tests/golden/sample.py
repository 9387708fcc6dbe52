"""A small, deterministic dataset made from test flows (tflow's fixed timestamps), for golden reports."""

from __future__ import annotations

import json
from pathlib import Path

from mitmproxy import http

from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.store.writer import DatasetWriter
from tests.factories import EXT, a2a_flow, agent_message, envelope, jsonrpc_result

ROUTINE = {"toolName": "book_table", "name": "Book a table"}


def _reply(mid: str, ctx: str, minute: int, **env: object):
    flow = a2a_flow(response=jsonrpc_result({"message": agent_message(mid, env=envelope(**env), contextId=ctx)}))
    for m in (flow.request, flow.response):
        m.timestamp_start += minute * 60
        m.timestamp_end = m.timestamp_start
    return flow


def sample_flows() -> list[http.HTTPFlow]:
    """The golden sample's flows, ids fixed."""
    cov = lambda c, r: {"availability": "assessed", "coverage": c, "reason": r}  # noqa: E731
    flows = [
        _reply("a1", "c1", 0),
        _reply("a2", "c1", 1, answerCoverage=cov("partial", "insufficient_evidence"), citations=[]),
        _reply("a3", "c2", 2, answerCoverage=cov("unanswered", "intentional_scope_boundary"), citations=None),
        _reply("a4", "c2", 3, author="human", ownership={"state": "human_owned", "suppressed": False}),
        _reply(
            "a5",
            "c3",
            4,
            answerCoverage={"availability": "not_recorded"},
            routine={
                **ROUTINE,
                "status": "waiting_for_input",
                "pendingInput": [{"key": "date", "type": "string", "required": True, "description": "Which day?"}],
            },
        ),
        _reply(
            "a6", "c3", 5, answerCoverage={"availability": "not_recorded"}, routine={**ROUTINE, "status": "abandoned"}
        ),
        _reply(
            "a7",
            "c4",
            6,
            answerCoverage={"availability": "not_recorded"},
            routine={**ROUTINE, "status": "completed"},
            invocation={"toolName": "book_table", "outcome": "started"},
        ),
        _reply("a1", "c1", 7),  # a poll sees a1 again
    ]
    card = {
        "name": "Support",
        "capabilities": {
            "extensions": [
                {
                    "uri": EXT,
                    "params": {
                        "mcp": {"url": "https://mcp.test/a", "serverCardUrl": "https://mcp.test/a/server-card"},
                        "tools": [{"toolName": "book_table", "inputSchema": {"type": "object", "required": ["date"]}}],
                    },
                }
            ]
        },
        "skills": [{"id": "book_table"}],
    }
    flows.append(a2a_flow(method="GET", path="/.well-known/agent-card.json", response=json.dumps(card).encode()))
    for i, flow in enumerate(flows):
        flow.id = f"ex-{i:02d}"
    return flows


def sample_extractions() -> list[Extraction]:
    """The sample's exchanges, extracted: 8 A2A calls (7 replies, one polled again) and one agent card."""
    out = []
    for flow in sample_flows():
        ext = extract(exchange_from_flow(flow), TextPolicy())
        assert ext is not None
        out.append(ext)
    return out


def build_sample(out: Path) -> None:
    writer = DatasetWriter(out, flush_interval=60)
    writer.start()
    for ext in sample_extractions():
        writer.submit(ext)
    writer.close()
