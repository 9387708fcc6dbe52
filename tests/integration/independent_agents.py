"""Agents of two independent A2A implementations on PyPI, each run in its own process on a free port of
127.0.0.1 (`python -m tests.integration.independent_agents fasta2a|python-a2a`, which prints `READY <base URL>`):

- fasta2a (pydantic's): a Starlette app whose worker answers a first turn with `input-required` and a question,
  and a second with an artifact and `completed`, both replies carrying the converse envelope in their metadata.
- python-a2a: a Flask app (its `A2AServer`, served by werkzeug) whose handler answers each message with a text;
  the library builds the task, its artifact and its stream events itself."""

from __future__ import annotations

import socket
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from converse_tap.a2a.constants import CONVERSE_URI

QUESTION = "For how many people?"
BOOKED = "Booked for 4."


def envelope(status: str) -> dict[str, Any]:
    """A converse envelope (spec v1) of a booking routine at `status`."""
    env: dict[str, Any] = {
        "author": "agent",
        "answerCoverage": {"availability": "assessed", "coverage": "answered", "reason": "sufficient_evidence"},
        "ownership": {"state": "ai_owned", "suppressed": False},
        "routine": {"toolName": "book_table", "name": "Book a table", "status": status},
    }
    if status == "waiting_for_input":
        env["routine"]["pendingInput"] = [{"key": "partySize", "type": "integer", "required": True}]
    return env


# the converse declaration's params (the spec's `mcp` and `tools`), on the fasta2a card
CARD_PARAMS: dict[str, Any] = {
    "mcp": {
        "url": "https://mcp.example/mcp/a/trattoria",
        "serverCardUrl": "https://mcp.example/mcp/a/trattoria/server-card",
    },
    "tools": [
        {
            "toolName": "book_table",
            "description": "Book a table",
            "inputSchema": {
                "type": "object",
                "properties": {"partySize": {"type": "integer"}},
                "required": ["partySize"],
            },
        }
    ],
}


def _listen() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def fasta2a_app(base: str) -> Any:
    from fasta2a import FastA2A, Worker
    from fasta2a.broker import InMemoryBroker
    from fasta2a.schema import AgentExtension, Artifact, Message, Skill, TaskIdParams, TaskSendParams
    from fasta2a.storage import InMemoryStorage

    class Booker(Worker[Any]):
        async def run_task(self, params: TaskSendParams) -> None:
            tid, cid = params["id"], params["context_id"]
            text = " ".join(p.get("text", "") for p in params["message"]["parts"])
            await self.storage.update_task(tid, state="working")
            await self.publish_status(tid, cid, "working")
            if "people" not in text:  # turn 1: ask
                reply = Message(
                    role="agent",
                    parts=[{"text": QUESTION}],
                    message_id=str(uuid.uuid4()),
                    metadata={CONVERSE_URI: envelope("waiting_for_input")},
                    extensions=[CONVERSE_URI],
                )
                await self.storage.update_task(tid, state="input-required", new_messages=[reply])
                await self.publish_status(tid, cid, "input-required", reply)
                return
            art = Artifact(
                artifact_id=str(uuid.uuid4()),
                name="booking",
                parts=[{"text": BOOKED}],
                metadata={CONVERSE_URI: envelope("completed")},
                extensions=[CONVERSE_URI],
            )
            await self.publish_artifact(tid, cid, art)
            await self.storage.update_task(tid, state="completed", new_artifacts=[art])

        async def cancel_task(self, params: TaskIdParams) -> None:
            await self.storage.update_task(params["id"], state="canceled")

        def build_message_history(self, history: list[Message]) -> list[Any]:
            return history

        def build_artifacts(self, result: Any) -> list[Artifact]:
            return []

    storage: InMemoryStorage[Any] = InMemoryStorage()
    broker = InMemoryBroker()
    worker = Booker(broker=broker, storage=storage)

    @asynccontextmanager
    async def lifespan(app: FastA2A) -> AsyncIterator[None]:
        async with app.task_manager, worker.run():
            yield

    ext = AgentExtension(uri=CONVERSE_URI, description="converse envelope", required=False, params=CARD_PARAMS)
    skill = Skill(id="book_table", name="Book a table", description="books a table", tags=["booking"],
                  input_modes=["text/plain"], output_modes=["text/plain"])  # fmt: skip
    return FastA2A(
        storage=storage, broker=broker, name="Trattoria", url=base, extensions=[ext], skills=[skill],
        lifespan=lifespan, docs_url=None,
    )  # fmt: skip


def run_fasta2a() -> None:
    import asyncio

    import uvicorn

    sock = _listen()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(fasta2a_app(base), log_level="warning"))

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        print(f"READY {base}", flush=True)
        await task

    asyncio.run(serve())


def python_a2a_app(base: str) -> Any:
    from python_a2a import A2AServer, Message, MessageRole, TextContent
    from python_a2a.server.http import create_flask_app

    class Booker(A2AServer):
        def handle_message(self, message: Message) -> Message:
            text = getattr(message.content, "text", "")
            answer = BOOKED if "people" in text else QUESTION
            return Message(
                content=TextContent(text=answer),
                role=MessageRole.AGENT,
                parent_message_id=message.message_id,
                conversation_id=message.conversation_id,
            )

        async def stream_response(self, message: Message) -> AsyncIterator[str]:
            for word in ("Booked", "for", "4."):
                yield word

    return create_flask_app(Booker(name="Trattoria", description="books tables", url=base))


def run_python_a2a() -> None:
    from werkzeug.serving import make_server

    sock = _listen()
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = make_server("127.0.0.1", 0, python_a2a_app(base), threaded=True, fd=sock.fileno())
    print(f"READY {base}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    {"fasta2a": run_fasta2a, "python-a2a": run_python_a2a}[sys.argv[1]]()
