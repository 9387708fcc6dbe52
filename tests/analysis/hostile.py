"""A dataset whose every free string is an attack: script, HTML, Markdown and terminal payloads from the wire."""

from __future__ import annotations

import json
from pathlib import Path

from tests.factories import EXT, a2a_flow, agent_message, envelope, jsonrpc_result, write_dataset

# Each script payload, if it ever ran, marks the page: an attribute `data-pwned` on <html> or a new title.
MARK = "document.documentElement.setAttribute('data-pwned','{n}')"
PAYLOADS = [
    f"</script><script>{MARK.format(n=1)}</script>",
    f'<img src=x onerror="{MARK.format(n=2)}">',
    "<svg onload=\"document.title='pwned3'\"><circle r=9></svg>",
    f'"><iframe srcdoc="<script>parent.{MARK.format(n=4)}</script>">',
    "' onmouseover='document.title=\"pwned5\"' x='",
    f"<!--<script>{MARK.format(n=6)}</script>",
    f"\u2028\u2029]]><script>{MARK.format(n=7)}</script>",
    f"[click](javascript:{MARK.format(n=8)}) ![i](x) <javascript:alert(8)>",
    "`code` | pipe\nnew line\r\n## heading\n<script>document.title='pwned9'</script>",
    f'<a href="javascript:{MARK.format(n=10)}">link</a>',
    "&lt;script&gt;document.title='pwned11'&lt;/script&gt; &#60;b&#62;",
    "\x1b[2J\x1b]0;owned\x07\x9b31m\rERASED\x08\u202egnp.exe\u2066\x00",
]
# the terminal payload alone (used to check the text outputs)
TERMINAL = PAYLOADS[-1]
JS_URL = f"javascript:{MARK.format(n=12)}"


def _flow(mid: str, minute: int, env: dict[str, object], path: str = "/a2a/jsonrpc"):  # type: ignore[no-untyped-def]
    flow = a2a_flow(path=path, response=jsonrpc_result({"message": agent_message(mid, env=envelope(**env))}))
    for m in (flow.request, flow.response):
        m.timestamp_start += minute * 60
        m.timestamp_end = m.timestamp_start
    return flow


def build_hostile(out: Path) -> None:
    flows = []
    for i, p in enumerate(PAYLOADS):
        flows.append(
            _flow(
                p[:40],
                i,
                {
                    "author": p if i % 3 == 0 else "agent",
                    "answerCoverage": {"availability": "assessed", "coverage": "answered", "reason": p},
                    "citations": [{"documentId": p, "title": p, "sourceUrl": JS_URL}],
                    "routine": {
                        "toolName": p,
                        "name": p,
                        "status": "waiting_for_input" if i % 2 else "abandoned",
                        "pendingInput": [{"key": p, "type": "string", "required": True, "description": p}],
                    },
                    "invocation": {"toolName": p, "outcome": "started"},
                },
                # the agent key is taken from the URL path: payloads that fit in a path
                path="/a2a/" + p.replace(" ", "%20").replace("\n", "").replace("\r", "")[:60].replace("?", "")
                if i % 4 == 3
                else "/a2a/jsonrpc",
            )
        )
    for i, p in enumerate(PAYLOADS):
        card = {
            "name": p,
            "capabilities": {
                "extensions": [
                    {
                        "uri": EXT,
                        "params": {
                            "mcp": {"url": JS_URL if i % 2 else p, "serverCardUrl": p},
                            "tools": [{"toolName": p, "inputSchema": {"type": "object", "required": [p]}}],
                        },
                    }
                ]
            },
            "skills": [{"id": "other"}],
        }
        flows.append(
            a2a_flow(
                method="GET",
                path=f"/agents/ag_hostile{i:04d}/.well-known/agent-card.json",
                response=json.dumps(card).encode(),
            )
        )
    write_dataset(out, flows, "ex-{:02d}")
