"""Push notifications: an agent's POST of a task's update to the webhook a client registered with it
(`CreateTaskPushNotificationConfig`, `tasks/pushNotificationConfig/set`, or a SendMessage's configuration).

The webhook is the client's URL, not an A2A route, so a delivery is recognised by what it carries (docs/schema.md,
"Push notifications"): the `X-A2A-Notification-Token` header, which A2A alone names; or A2A headers and a body that
holds an A2A object; or a body that is strictly one — a v1.0 `StreamResponse` (one member, `task`, `message`,
`statusUpdate` or `artifactUpdate`, holding that object with its required fields of their types) or a v0.3 `Task`,
`Message`, `TaskStatusUpdateEvent` or `TaskArtifactUpdateEvent` (its `kind` and required fields). Anything else is
not A2A. The objects delivered are read by the walk a stream event's or a task poll's are read by (`objects`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from . import fastjson
from .charset import loads_not_utf8
from .classify import _UNPARSED, A2ARequest, _has_a2a_headers, _version_dialect
from .constants import PUSH_BINDING, PUSH_METHOD, ROLES, TASK_STATE_NUMBERS, TASK_STATES
from .headers import Headers
from .objects import _KINDS, _WRAPPERS, Walk, get

if TYPE_CHECKING:  # (the proxy's first look imports this module: no more than it needs)
    from .rows import Ctx

TOKEN_HEADER = "x-a2a-notification-token"
_V1_MEMBERS = _WRAPPERS  # a v1.0 StreamResponse's members, as the walk reads them in a stream event
_V03_KINDS = _KINDS  # a v0.3 object's `kind`s, likewise
# a v1.0 StreamResponse's one member opens the body; a v0.3 object names its `kind` anywhere in it
_V1_OPENING = re.compile(rb'\s*\{\s*"(?:task|message|statusUpdate|artifactUpdate|status_update|artifact_update)"\s*:')
_OPENING = 96  # bytes of a body the opening is looked for in
_V03_KIND = re.compile(rb'"kind"\s*:\s*"(?:task|message|status-update|artifact-update)"')
_KINDS_LOOKED_AT = 64  # `"kind"` keys of a body looked at: a v0.3 task's own follows its history's messages'
SEARCH = 256 * 1024  # bytes of a body `"kind"` is looked for in (firstlook's search of a body for `jsonrpc`)


def may_be_push(headers: Headers | Any, body: bytes | None) -> bool:
    """A cheap look, on the proxy's event loop too (`firstlook`): could this POST be a push delivery? False only when
    `classify_push` would surely say None. Reads four headers and at most the first SEARCH bytes of the body."""
    if headers.get(TOKEN_HEADER) is not None or _has_a2a_headers(headers):
        return True
    if not body:
        return False
    if _V1_OPENING.match(body, 0, _OPENING) is not None:
        return True
    at = body.find(b'"kind"', 0, SEARCH)
    for _ in range(_KINDS_LOOKED_AT):  # (another API's `"kind": "Pod"` is not one: a few are looked at)
        if at < 0:
            return False
        if _V03_KIND.match(body, at, at + 64) is not None:
            return True
        at = body.find(b'"kind"', at + 6, SEARCH)
    return False


def classify_push(
    origin: str, path: str, headers: Headers, body: bytes | None, doc: Any, unparsed: str | None, notes: list[str]
) -> A2ARequest | None:
    """A POST that no A2A route or JSON-RPC method takes, as a push delivery, or None. `doc` is the parsed body, or
    classify's `_UNPARSED` when it is not parsed yet (parsed here, when it may be one); `unparsed` says why a body
    is not there to parse (`body_too_large`, `too_many_values`, ..., `not_seen`)."""
    token = headers.get(TOKEN_HEADER) is not None
    if not token and not may_be_push(headers, body):
        return None
    read: list[str] = []  # how a body that is not UTF-8 was read (charset.py)
    if doc is _UNPARSED:
        doc = None
        if body:
            try:
                try:
                    doc = fastjson.loads(body)
                except UnicodeDecodeError:
                    doc, note = loads_not_utf8(body, headers.get("content-type"), "request")
                    read.append(note)
            except RecursionError:
                unparsed = "json_too_deep"
            except fastjson.TooManyValues:
                unparsed = "too_many_values"
            except ValueError as e:
                unparsed = f"invalid_json:{type(e).__name__}"
        elif unparsed is None:
            unparsed = "empty"
    shape = strict_shape(doc)
    if shape is None and not token and not (_has_a2a_headers(headers) and _carries_a2a(doc)):
        return None
    v03 = isinstance(doc, dict) and "kind" in doc
    dialect = _version_dialect(headers) or shape or ("v0.3" if v03 else "v1.0")
    anomalies = [*notes, *read]
    if unparsed is not None:
        anomalies.append(f"request_not_parsed:{unparsed}")
    return A2ARequest(
        PUSH_BINDING,
        PUSH_METHOD,
        PUSH_METHOD,
        dialect,
        origin + path,  # the webhook's: the agent that posted is not named (facts_sql attributes its rows)
        params=None if unparsed is not None else doc,
        certain=True,
        anomalies=anomalies,
    )


def strict_shape(doc: Any) -> str | None:
    """The dialect of a body that is strictly an A2A push delivery (see the module's docstring), else None."""
    if not isinstance(doc, dict):
        return None
    kind = doc.get("kind")
    if kind is not None:
        named = _V03_KINDS.get(kind) if isinstance(kind, str) else None
        return "v0.3" if named is not None and _strict(named, doc, True) else None
    if len(doc) != 1:
        return None
    ((member, inner),) = doc.items()
    named = _V1_MEMBERS.get(member)
    return "v1.0" if named is not None and isinstance(inner, dict) and _strict(named, inner, False) else None


def _carries_a2a(doc: Any) -> bool:
    """A body with A2A headers that holds an A2A object by its name: a v0.3 `kind` or a v1.0 member."""
    if not isinstance(doc, dict):
        return False
    kind = doc.get("kind")
    return (isinstance(kind, str) and kind in _V03_KINDS) or any(k in _V1_MEMBERS for k in doc)


def _strict(kind: str, obj: dict[str, Any], v03: bool) -> bool:
    if v03 and not _text(obj, "contextId") and kind != "message":  # (v0.3 requires it of a task and its events)
        return False
    if not _optional_text(obj, "contextId"):
        return False
    if kind == "task":
        return _text(obj, "id") and _status(obj.get("status")) and _lists(obj, ("history", "artifacts"))
    if kind == "message":
        role = obj.get("role")
        return (
            _text(obj, "messageId")
            and isinstance(role, (str, int))
            and not isinstance(role, bool)
            and role in ROLES
            and isinstance(obj.get("parts"), list)
        )
    if kind == "statusUpdate":
        return _text(obj, "taskId") and _status(obj.get("status"))
    artifact = obj.get("artifact")
    return _text(obj, "taskId") and isinstance(artifact, dict) and _text(artifact, "artifactId")


def _text(obj: dict[str, Any], name: str) -> bool:
    value = get(obj, name)
    return isinstance(value, str) and value != ""


def _optional_text(obj: dict[str, Any], name: str) -> bool:
    value = get(obj, name)
    return value is None or isinstance(value, str)


def _lists(obj: dict[str, Any], names: tuple[str, ...]) -> bool:
    return all(obj.get(n) is None or isinstance(obj.get(n), list) for n in names)


def _status(status: Any) -> bool:
    """A task status that names a task state (any spelling, or a ProtoJSON enum number)."""
    if not isinstance(status, dict):
        return False
    state = status.get("state")
    if isinstance(state, str):
        return state in TASK_STATES
    return isinstance(state, int) and not isinstance(state, bool) and state in TASK_STATE_NUMBERS


def read_delivery(ctx: Ctx, walk: Walk) -> None:
    """The objects a push delivery carries: the agent's (direction `response`), seen when it was posted."""
    req = ctx.req
    if any(a.startswith("request_not_parsed:") for a in req.anomalies):
        return  # (said so already)
    ctx.delivered(req.params, walk, ctx.ex.ts_start)
    if not walk.event_kinds:  # (recognised by its token or A2A headers alone)
        ctx.out.exchange["anomalies"].append("push_body_not_a2a")
