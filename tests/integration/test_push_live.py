"""A real a2a-sdk agent with push notifications posts its task's updates through a real recorder (mitmdump with
the addon) to a real webhook: the dataset holds the delivered reply, its envelope, and never the token."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
)
from google.protobuf import json_format, struct_pb2
from starlette.applications import Starlette

from converse_tap.a2a.constants import CONVERSE_URI, PUSH_AGENT, PUSH_METHOD
from converse_tap.analysis.engine import Engine
from converse_tap.store.reader import load
from tests.factories import envelope
from tests.integration.procs import mitmdump

pytestmark = pytest.mark.integration
TOKEN = "push-token-7c2e9a41d5b3"
REPLY = "Your table for two is booked at 19:30."


class Booker(AgentExecutor):
    """Answers every message with a completed task whose status message carries the converse envelope."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        up = TaskUpdater(event_queue, task.id, task.context_id)
        await up.start_work()
        meta = struct_pb2.Struct()
        json_format.ParseDict({CONVERSE_URI: envelope()}, meta)
        out = up.new_agent_message(parts=[Part(text=REPLY)], metadata=json_format.MessageToDict(meta))
        out.extensions.append(CONVERSE_URI)
        await up.complete(out)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


class Webhook(BaseHTTPRequestHandler):
    """The client's webhook: keeps what was posted to it."""

    received: list[tuple[dict[str, str], bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.received.append((dict(self.headers), body))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # (quiet)
        pass


@contextmanager
def webhook() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Webhook)
    server.received = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/a2a", server.received  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()


async def _run(proxy: str, hook: str, received: list[Any]) -> None:
    """The agent (its push sender's HTTP client through the proxy), and a client that asks it with a webhook."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    card = AgentCard(
        name="Booker",
        description="Books tables",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=f"{base}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=False, push_notifications=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="book", name="Book", description="Books a table", tags=["booking"])],
    )
    async with httpx.AsyncClient(proxy=proxy, timeout=30) as pusher, httpx.AsyncClient(proxy=proxy, timeout=30) as http:
        configs = InMemoryPushNotificationConfigStore()
        handler = DefaultRequestHandler(
            agent_executor=Booker(),
            task_store=InMemoryTaskStore(),
            agent_card=card,
            push_config_store=configs,
            push_sender=BasePushNotificationSender(pusher, configs),
        )
        app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/a2a")])
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            while not server.started:
                await asyncio.sleep(0.01)
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
            push = TaskPushNotificationConfig(url=hook, token=TOKEN)
            request = SendMessageRequest(
                message=Message(message_id="u-1", role=Role.ROLE_USER, parts=[Part(text="A table for two?")]),
                configuration=SendMessageConfiguration(task_push_notification_config=push),
            )
            async for _ in client.send_message(request):
                pass
            await client.close()
            for _ in range(500):  # the deliveries are posted after the answer: wait for them to be in
                await asyncio.sleep(0.02)
                if any(REPLY.encode() in body for _, body in received):
                    break
        finally:
            server.should_exit = True
            await serving
            sock.close()


def test_a_pushed_reply_is_recorded_through_the_proxy(tmp_path: Path) -> None:
    out = tmp_path / "data"
    with webhook() as (hook, received), mitmdump(out) as (proxy, proc):
        asyncio.run(_run(proxy, hook, received))
    assert proc.popen.returncode == 0, proc.output
    posted = [json.loads(body) for _, body in received]
    assert posted and all(h.get("X-A2A-Notification-Token") == TOKEN for h, _ in received)
    ex = load(out, "exchanges")
    pushes = ex[ex["method"] == PUSH_METHOD]
    assert len(pushes) == len(posted)  # every delivery the webhook took is recorded
    assert set(pushes["binding"]) == {"webhook"} and set(pushes["agent"]) == {PUSH_AGENT}
    assert pushes["complete"].all() and not pushes["anomalies"].apply(len).any()
    send = ex[ex["method"] == "SendMessage"]
    assert len(send) == 1 and set(pushes["task_id"]) == set(send["task_id"])
    msgs = load(out, "messages")
    delivered = msgs[(msgs["method"] == PUSH_METHOD) & (msgs["role"] == "agent")]
    assert REPLY in delivered["text"].tolist()
    reply = delivered[delivered["text"] == REPLY].iloc[0]
    assert reply["has_envelope"] and reply["coverage"] == "answered" and reply["direction"] == "response"
    assert reply["location"].startswith("push.")
    # the reply counts once, under the agent (its SendMessage answer carried the same message)
    with Engine.over_dataset(out) as engine:
        replies = engine.replies()
    mine = replies[replies["message_id"] == reply["message_id"]]
    assert len(mine) == 1 and mine.iloc[0]["agent"] == send.iloc[0]["agent"]
    # the token is a credential: in no file the recorder wrote
    for f in out.rglob("*"):
        if f.is_file():
            assert TOKEN.encode() not in f.read_bytes(), f
