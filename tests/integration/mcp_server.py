"""An MCP server of the official Python SDK (`mcp`, its lowlevel `Server`) over Streamable HTTP on 127.0.0.1, in its
own process: `python -m tests.integration.mcp_server` prints `READY <url>` once it listens, with two endpoints,
`/json/mcp` (replies as `application/json`) and `/sse/mcp` (replies as `text/event-stream`).

Its tools: `add`, `echo`, and `book`, which makes a task (MCP 2025-11-25's tasks) and answers its id: `tasks/get`,
`tasks/list`, `tasks/cancel` and `tasks/result` read it. SDK 2.3.0 has the types of 2025-11-25's tasks but serves
none of their methods, and its server refuses a `CreateTaskResult` as a `tools/call` reply ("Handler returned an
invalid result"), so a task-augmented `tools/call` is not made here; the tasks/* handlers are this server's own,
registered on the SDK's server with `add_request_handler`: the wire (headers, framing, session) is the SDK's."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel.server import Server
from starlette.applications import Starlette
from starlette.routing import Mount

TOOLS = [
    types.Tool(
        name="add",
        input_schema={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    ),
    types.Tool(name="echo", input_schema={"type": "object", "properties": {"text": {"type": "string"}}}),
    types.Tool(
        name="book",
        input_schema={"type": "object", "properties": {"party": {"type": "integer"}}},
    ),
]
CREATED = "2026-12-07T06:00:00Z"


def _tool_result(name: str, args: dict[str, Any]) -> types.CallToolResult:
    if name == "add":
        text = str(int(args["a"]) + int(args["b"]))
    elif name == "echo":
        text = str(args["text"])
    else:
        text = f"Booked for {args['party']}"
    return types.CallToolResult(content=[types.TextContent(text=text)])


def _server() -> Server[Any]:
    by_session: dict[str, dict[str, tuple[types.Task, types.CallToolResult]]] = {}  # (each session's own tasks)

    def store(ctx: Any) -> dict[str, tuple[types.Task, types.CallToolResult]]:
        return by_session.setdefault(ctx.request.headers["mcp-session-id"], {})

    def task(task_id: str, status: types.TaskStatus) -> types.Task:
        return types.Task(
            task_id=task_id, status=status, created_at=CREATED, last_updated_at=CREATED, ttl=60000, poll_interval=100
        )

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        result, tasks = _tool_result(params.name, params.arguments or {}), store(ctx)
        if params.name == "book":  # a task made, which the tasks/* calls read
            task_id = f"t-{len(tasks) + 1}"
            tasks[task_id] = (task(task_id, "working"), result)
            result = types.CallToolResult(content=[types.TextContent(text=task_id)])
        return result

    async def get_task(ctx: Any, params: types.GetTaskRequestParams) -> types.GetTaskResult:
        return types.GetTaskResult(**store(ctx)[params.task_id][0].model_dump())

    async def list_tasks(ctx: Any, params: Any) -> types.ListTasksResult:
        return types.ListTasksResult(tasks=[t for t, _ in store(ctx).values()])

    async def cancel_task(ctx: Any, params: types.CancelTaskRequestParams) -> types.CancelTaskResult:
        cancelled, tasks = task(params.task_id, "cancelled"), store(ctx)
        tasks[params.task_id] = (cancelled, tasks[params.task_id][1])
        return types.CancelTaskResult(**cancelled.model_dump())

    async def task_result(ctx: Any, params: types.GetTaskPayloadRequestParams) -> types.CallToolResult:
        return store(ctx)[params.task_id][1]

    server: Server[Any] = Server("tap-mcp", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)
    server.add_request_handler("tasks/get", types.GetTaskRequestParams, get_task)
    server.add_request_handler("tasks/list", types.PaginatedRequestParams, list_tasks)
    server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, cancel_task)
    server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, task_result)
    return server


def app() -> Starlette:
    plain, sse = _server(), _server()
    json_app = plain.streamable_http_app(streamable_http_path="/mcp", json_response=True)
    sse_app = sse.streamable_http_app(streamable_http_path="/mcp", json_response=False)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with plain.session_manager.run(), sse.session_manager.run():
            yield

    return Starlette(routes=[Mount("/json", json_app), Mount("/sse", sse_app)], lifespan=lifespan)


async def _main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app(), log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.05)
    print(f"READY http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(_main())
