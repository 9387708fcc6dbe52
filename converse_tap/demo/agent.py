"""The demo agent on the official a2a-sdk: JSON-RPC and HTTP+JSON, v1.0 and v0.3, streaming and not."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
)
from google.protobuf import json_format, struct_pb2
from starlette.applications import Starlette
from starlette.routing import Mount

from ..a2a.constants import CONVERSE_URI
from .brain import ROUTINES, Conversation, Reply, respond

AGENTS = {"ag_trattoria01": "Trattoria Roma", "ag_osteria02": "Osteria Milano"}


def _value(obj: Any) -> struct_pb2.Value:
    return json_format.ParseDict(obj, struct_pb2.Value())


def _user_call(message: Message) -> dict[str, Any] | None:
    """A typed routine call: a data part {"toolName": ..., "arguments": ...}."""
    for part in message.parts:
        if part.HasField("data"):
            data = json_format.MessageToDict(part.data)
            if isinstance(data, dict) and "toolName" in data:
                return data
    return None


class ConverseExecutor(AgentExecutor):
    """Turns each user message into one reply; metadata only when the request activated the extension."""

    def __init__(self) -> None:
        self.conversations: dict[str, Conversation] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        conv = self.conversations.setdefault(context.context_id or "", Conversation())
        reply = respond(conv, context.get_user_input(), message.message_id, _user_call(message))
        active = CONVERSE_URI in context.requested_extensions
        meta = {CONVERSE_URI: reply.envelope} if active else None
        extensions = [CONVERSE_URI] if active else []
        if reply.task_state is None:
            out = Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_AGENT,
                context_id=context.context_id,
                parts=[Part(text=reply.text)],
                extensions=extensions,
            )
            if meta:
                out.metadata.update(meta)
            await event_queue.enqueue_event(out)
            return
        await self._task_turn(context, event_queue, reply, meta, extensions)

    async def _task_turn(
        self,
        context: RequestContext,
        queue: EventQueue,
        reply: Reply,
        meta: dict[str, Any] | None,
        extensions: list[str],
    ) -> None:
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await queue.enqueue_event(task)
        up = TaskUpdater(queue, task.id, task.context_id)
        await up.start_work()
        if reply.artifact is not None:
            await up.add_artifact(
                parts=[Part(text=reply.artifact["text"]), Part(data=_value(reply.artifact["data"]))],
                name=reply.artifact["name"],
                metadata=meta,
                extensions=extensions or None,
            )
        out = up.new_agent_message(parts=[Part(text=reply.text)], metadata=meta)
        out.extensions.extend(extensions)
        if reply.task_state == "TASK_STATE_INPUT_REQUIRED":
            await up.requires_input(out)
        elif reply.task_state == "TASK_STATE_CANCELED":
            await up.cancel(out)
        else:
            await up.complete(out)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def agent_card(base: str, agent_id: str, name: str, grpc_target: str | None = None) -> AgentCard:
    ext = AgentExtension(
        uri=CONVERSE_URI,
        description="Radioso conversation extension. params.mcp names this agent's MCP endpoint and server card; "
        "params.tools lists each exposed routine with the JSON Schema of its input.",
        required=False,
    )
    mcp = f"{base}/mcp/a/{agent_id}"
    ext.params.update(
        {
            "mcp": {"url": mcp, "serverCardUrl": f"{mcp}/server-card"},
            "tools": [
                {"toolName": r.tool, "description": r.description, "inputSchema": r.input_schema()}
                for r in ROUTINES.values()
            ],
        }
    )
    rpc, rest = f"{base}/a2a/{agent_id}", f"{base}/rest/{agent_id}"
    skills = [AgentSkill(id="ask_agent", name="Ask", description="Questions about the restaurant", tags=["faq"])]
    skills += [
        AgentSkill(id=r.tool, name=r.name, description=r.description, tags=["routine"]) for r in ROUTINES.values()
    ]
    interfaces = [
        AgentInterface(url=rpc, protocol_binding="JSONRPC", protocol_version="1.0"),
        AgentInterface(url=rest, protocol_binding="HTTP+JSON", protocol_version="1.0"),
        AgentInterface(url=rpc, protocol_binding="JSONRPC", protocol_version="0.3"),
        AgentInterface(url=rest, protocol_binding="HTTP+JSON", protocol_version="0.3"),
    ]
    if grpc_target:  # one gRPC server per agent (GrpcAgentServer); the tenant names the agent (v1.0 only)
        interfaces += [
            AgentInterface(url=grpc_target, protocol_binding="GRPC", protocol_version="1.0", tenant=agent_id),
            AgentInterface(url=grpc_target, protocol_binding="GRPC", protocol_version="0.3"),
        ]
    return AgentCard(
        name=name,
        description=f"{name}: opening hours, allergens, bookings.",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(
            streaming=True, push_notifications=False, extended_agent_card=False, extensions=[ext]
        ),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=skills,
    )


class EchoExtensions:
    """ASGI middleware: echo the activated converse URI in the response's A2A-Extensions header (the spec's
    activation signal; the a2a-sdk does not send it)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        asked = b",".join(v for k, v in scope["headers"] if k in (b"a2a-extensions", b"x-a2a-extensions"))
        active = CONVERSE_URI.encode() in [u.strip() for u in asked.split(b",")]

        async def echo(message: dict[str, Any]) -> None:
            if active and message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"a2a-extensions", CONVERSE_URI.encode())],
                }
            await send(message)

        await self.app(scope, receive, echo)


def build_app(base: str, grpc_targets: dict[str, str] | None = None) -> Starlette:
    """Both demo agents on one server: cards at /agents/<id>/.well-known/agent-card.json (listing a gRPC
    interface for the agents in `grpc_targets`)."""
    cards: list[Any] = []
    rpc: list[Any] = []
    rest: list[Any] = []
    for agent_id, name in AGENTS.items():
        card = agent_card(base, agent_id, name, (grpc_targets or {}).get(agent_id))
        handler = DefaultRequestHandler(
            agent_executor=ConverseExecutor(), task_store=InMemoryTaskStore(), agent_card=card
        )
        cards += create_agent_card_routes(card, card_url=f"/agents/{agent_id}/.well-known/agent-card.json")
        rpc += create_jsonrpc_routes(handler, rpc_url=f"/a2a/{agent_id}", enable_v0_3_compat=True)
        # the SDK mounts a catch-all /{tenant} beside the REST routes: give each agent its own sub-app
        rest.append(
            Mount(
                f"/rest/{agent_id}",
                app=Starlette(routes=create_rest_routes(handler, enable_v0_3_compat=True)),
            )
        )
    routes = cards + rpc + rest
    app = Starlette(routes=routes)
    app.add_middleware(EchoExtensions)
    return app


@dataclass
class AgentServer:
    """uvicorn serving the demo agents on 127.0.0.1; port 0 picks a free port, read back after start."""

    host: str = "127.0.0.1"
    port: int = 0
    server: Any = None
    task: asyncio.Task[None] | None = None
    sockets: list[Any] = field(default_factory=list)
    grpc_targets: dict[str, str] | None = None  # agent id -> host:port of its GrpcAgentServer

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        import socket

        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        self.port = sock.getsockname()[1]
        self.sockets = [sock]
        config = uvicorn.Config(
            build_app(self.base, self.grpc_targets), log_level="warning", lifespan="off", access_log=False
        )
        self.server = uvicorn.Server(config)
        self.task = asyncio.create_task(self.server.serve(sockets=self.sockets))
        while not self.server.started:
            if self.task.done():
                self.task.result()
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self.server is not None and self.task is not None:
            self.server.should_exit = True
            await self.task
        for s in self.sockets:
            s.close()
