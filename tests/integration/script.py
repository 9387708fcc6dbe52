"""The scripted conversation the integration tests hold with the demo agent through the recorder, whatever the
binding: book a table in three turns, poll the task, ask a question."""

from __future__ import annotations

import uuid
from typing import Any

from a2a.client import ClientCallContext
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types.a2a_pb2 import GetTaskRequest, Message, Part, Role, SendMessageRequest

from converse_tap.a2a.constants import CONVERSE_URI

TURNS = ("I'd like to book a table", "On 2026-12-24", "For 4 people", "Where can I park nearby?")


async def book_a_table(client: Any) -> list[str]:
    """Book a table in three turns, poll the task, ask a question; returns the reply texts the client saw."""
    ctx = ClientCallContext(service_parameters=ServiceParametersFactory.create([with_a2a_extensions([CONVERSE_URI])]))
    texts: list[str] = []
    context_id = task_id = ""
    for text in TURNS:
        msg = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=context_id,
            task_id=task_id,
        )
        last_task = ""
        async for ev in client.send_message(SendMessageRequest(message=msg), context=ctx):
            kind = ev.WhichOneof("payload")
            if kind == "task":
                context_id, last_task = ev.task.context_id, ev.task.id
                if ev.task.status.message.parts:
                    texts.append(ev.task.status.message.parts[0].text)
            elif kind == "status_update":
                context_id, last_task = ev.status_update.context_id, ev.status_update.task_id
                if ev.status_update.status.message.parts:
                    texts.append(ev.status_update.status.message.parts[0].text)
            elif kind == "message":
                context_id = ev.message.context_id
                texts.append(ev.message.parts[0].text)
        task_id = last_task if text != "For 4 people" and last_task else ""
        if text == "For 4 people":
            await client.get_task(GetTaskRequest(id=last_task, history_length=10), context=ctx)
    return texts
