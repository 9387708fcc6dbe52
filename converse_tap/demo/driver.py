"""Drive planned conversations through the proxy with the official a2a-sdk client."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import ClientCallContext, ClientConfig, ClientFactory
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types.a2a_pb2 import (
    AgentCard,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from google.protobuf import json_format, struct_pb2

from ..a2a.constants import CONVERSE_URI
from .plans import Plan, Step

_INTERRUPTED = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}


@dataclass
class DriveStats:
    conversations: int = 0
    turns: int = 0
    requests: int = 0
    requests_with_extension: int = 0
    polls: int = 0
    resubscribes: int = 0
    errors: list[str] = field(default_factory=list)
    sent: dict[str, list[str]] = field(default_factory=dict)  # per conversation (context id): the texts sent


class Driver:
    def __init__(self, agent_base: str, proxy_url: str, concurrency: int = 4) -> None:
        self.agent_base = agent_base
        self.proxy_url = proxy_url
        self.concurrency = concurrency
        self.stats = DriveStats()
        self._cards: dict[str, AgentCard] = {}

    async def run(self, plans: list[Plan], progress: Callable[[Plan], None] | None = None) -> DriveStats:
        sem = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency * 4)
        async with httpx.AsyncClient(proxy=self.proxy_url, timeout=30, limits=limits) as http:

            async def one(plan: Plan) -> None:
                async with sem:
                    try:
                        await self._conversation(http, plan)
                    except Exception as e:  # one broken conversation is reported, the rest still run
                        self.stats.errors.append(f"conversation {plan.index} ({plan.kind}): {type(e).__name__}: {e}")
                    self.stats.conversations += 1
                    if progress is not None:
                        progress(plan)

            await asyncio.gather(*(one(p) for p in plans))
        return self.stats

    def _card_for(self, card: AgentCard, dialect: str, binding: str) -> AgentCard:
        out = AgentCard()
        out.CopyFrom(card)
        keep = [i for i in card.supported_interfaces if i.protocol_version == dialect and i.protocol_binding == binding]
        del out.supported_interfaces[:]
        out.supported_interfaces.extend(keep)
        return out

    async def _conversation(self, http: httpx.AsyncClient, plan: Plan) -> None:
        config = ClientConfig(httpx_client=http, streaming=plan.streaming, supported_protocol_bindings=[plan.binding])
        card = await _fetch_card(http, f"{self.agent_base}/agents/{plan.agent}")  # through the proxy, as clients do
        client = ClientFactory(config).create(self._card_for(card, plan.dialect, plan.binding))
        ctx = None
        if plan.extension:
            params = ServiceParametersFactory.create([with_a2a_extensions([CONVERSE_URI])])
            ctx = ClientCallContext(service_parameters=params)
        context_id = open_task = ""
        texts: list[str] = []
        try:
            for step in plan.steps:
                texts.append(step.text)
                if plan.resubscribe and open_task:
                    context_id, task, state = await self._send_while_subscribed(
                        client, plan, step, ctx, context_id, open_task
                    )
                else:
                    context_id, task, state = await self._send(client, plan, step, ctx, context_id, open_task)
                open_task = task if state in _INTERRUPTED else ""
                if plan.poll and task:  # the poll sees the reply again, and the history before it
                    self._count(plan)
                    self.stats.polls += 1
                    await client.get_task(GetTaskRequest(id=task, history_length=20), context=ctx)
        finally:
            if context_id:
                self.stats.sent[context_id] = texts
            await client.close()

    def _count(self, plan: Plan) -> None:
        self.stats.requests += 1
        if plan.extension:
            self.stats.requests_with_extension += 1

    def _message(self, step: Step, context_id: str, task_id: str) -> SendMessageRequest:
        parts = [Part(text=step.text)]
        if step.call is not None:
            parts.append(Part(data=json_format.ParseDict(step.call, struct_pb2.Value())))
        return SendMessageRequest(
            message=Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_USER,
                parts=parts,
                context_id=context_id,
                task_id=task_id,
            )
        )

    async def _send(
        self,
        client: Any,
        plan: Plan,
        step: Step,
        ctx: ClientCallContext | None,
        context_id: str,
        task_id: str,
    ) -> tuple[str, str, Any]:
        """One turn; returns the context, the task the turn ran in ('' for a plain message) and its state."""
        self._count(plan)
        self.stats.turns += 1
        state = None
        task = ""
        async for ev in client.send_message(self._message(step, context_id, task_id), context=ctx):
            context_id, task, state = _follow(ev, context_id, task, state)
        return context_id, task, state

    async def _send_while_subscribed(
        self,
        client: Any,
        plan: Plan,
        step: Step,
        ctx: ClientCallContext | None,
        context_id: str,
        task_id: str,
    ) -> tuple[str, str, Any]:
        """Re-attach to the open task, send the next turn once the subscription has its first event, and leave
        once the subscription has seen that turn's outcome (the SDK keeps a subscription to an interrupted
        task open, so a client that is done closes it: the proxy records it as incomplete)."""
        first, outcome = asyncio.Event(), asyncio.Event()

        async def follow() -> None:
            self._count(plan)
            self.stats.resubscribes += 1
            async for ev in client.subscribe(SubscribeToTaskRequest(id=task_id), context=ctx):
                first.set()
                if ev.WhichOneof("payload") == "status_update" and ev.status_update.status.message.parts:
                    outcome.set()
            first.set()
            outcome.set()

        sub = asyncio.create_task(follow())
        try:
            await _first_of(sub, first.wait())
            result = await self._send(client, plan, step, ctx, context_id, task_id)
            await asyncio.wait_for(_first_of(sub, outcome.wait()), timeout=30)
        finally:
            if not sub.done():
                sub.cancel()
            await asyncio.gather(sub, return_exceptions=True)
        if sub.done() and not sub.cancelled() and sub.exception() is not None:
            raise sub.exception()  # type: ignore[misc]
        return result


async def _first_of(task: asyncio.Task[None], wait: Any) -> None:
    waiter = asyncio.ensure_future(wait)
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()


def _follow(ev: Any, context_id: str, task_id: str, state: Any) -> tuple[str, str, Any]:
    kind = ev.WhichOneof("payload")
    if kind == "task":
        return ev.task.context_id or context_id, ev.task.id or task_id, ev.task.status.state
    if kind == "message":
        return ev.message.context_id or context_id, task_id, state
    if kind == "status_update":
        return (
            ev.status_update.context_id or context_id,
            ev.status_update.task_id or task_id,
            ev.status_update.status.state,
        )
    return context_id, task_id, state


async def _fetch_card(http: httpx.AsyncClient, base: str) -> AgentCard:
    from a2a.client.card_resolver import A2ACardResolver

    return await A2ACardResolver(http, base).get_agent_card()
