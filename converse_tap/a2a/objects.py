"""Walk A2A payloads of either dialect and yield every message-bearing object with its place and task."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .constants import CONVERSE_URI, MAX_URIS, ROLES, TASK_STATE_NUMBERS, TASK_STATES
from .envelope import clip

# v0.3 `kind` discriminators and v1.0 / snake_case wrapper keys -> one event-kind vocabulary
_KINDS = {
    "task": "task",
    "message": "message",
    "status-update": "statusUpdate",
    "artifact-update": "artifactUpdate",
}
_WRAPPERS = {
    "task": "task",
    "message": "message",
    "statusUpdate": "statusUpdate",
    "artifactUpdate": "artifactUpdate",
    "status_update": "statusUpdate",
    "artifact_update": "artifactUpdate",
    "msg": "message",  # v0.3 proto: `Message msg = 2 [json_name = "message"]`, as a proto-named printer writes it
}


@dataclass(slots=True)
class Sighting:
    """A message or artifact found at `location`, with the task it belongs to as far as the payload says."""

    location: str
    object_kind: str  # "message" | "artifact"
    event_kind: str | None
    obj: dict[str, Any]
    task_id: str | None = None
    context_id: str | None = None
    task_state: str | None = None


# messages and artifacts recorded per exchange: each is a row of some forty columns, and `{},` is three bytes of a
# task's history, so a 16 MiB body would be 5.6 million rows; past this they are counted (`skipped`), not kept
MAX_SIGHTINGS = 20_000


@dataclass(slots=True)
class Walk:
    sightings: list[Sighting] = field(default_factory=list)
    skipped: int = 0  # sightings past MAX_SIGHTINGS: counted, not kept
    task_id: str | None = None
    context_id: str | None = None
    task_state: str | None = None
    event_kinds: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    # the first status's `timestamp` is still to be checked (ProtoJSON: v1.0 and HTTP+JSON; `_stamp`)
    stamps: bool = False
    # a v0.3 JSON-RPC exchange: a result in v1.0's wrapper shape (`{"task": {...}}`, no `kind`) is said, once
    v03: bool = False
    v03_said: bool = False


def normalise_state(value: Any, anomalies: list[str] | None = None) -> str | None:
    """Any spelling of a task state -> its v1.0 name; an unknown value is kept verbatim (and noted)."""
    if value is None:
        return None
    if isinstance(value, str):
        known = TASK_STATES.get(value)
        if known:
            return known
        if known is None and anomalies is not None:
            anomalies.append(f"unknown_enum:task.state={clip(value)}")
        return known or value
    if isinstance(value, int) and not isinstance(value, bool):
        number = TASK_STATE_NUMBERS.get(value)
        if number is None and anomalies is not None:
            anomalies.append(f"unknown_enum:task.state={clip(value)}")
        return number or str(value)
    if anomalies is not None:
        anomalies.append(f"wrong_type:task.state={type(value).__name__}")
    return str(value)


def normalise_role(value: Any, anomalies: list[str] | None = None) -> str | None:
    if value is None:
        return None
    # (a boolean is no role: `true` would look up as the number 1, ROLE_USER)
    role = ROLES.get(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if role is None:
        if anomalies is not None:
            anomalies.append(f"unknown_enum:message.role={clip(value)}")
        return str(value)
    return role


_SNAKE: dict[str, str] = {}


def get(obj: dict[str, Any], name: str) -> Any:
    """A field by its JSON (lowerCamel) name or its proto (snake_case) name: ProtoJSON accepts both, and the
    a2a-sdk's v0.3 REST client sends the latter."""
    value = obj.get(name)
    if value is None:
        snake = _SNAKE.get(name)
        if snake is None:
            snake = _SNAKE[name] = re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)
        value = obj.get(snake)
    return value


def id_text(value: Any, where: str, anomalies: list[str]) -> str | None:
    """An id (of a task, an event, a message's task or context): a string, '' and null meaning absent; one of
    another type is kept as its text, and said so (`wrong_type:<where>=<type>`)."""
    if value.__class__ is str:
        return value or None
    if value is None or value == "":
        return None
    anomalies.append(f"wrong_type:{where}={type(value).__name__}")
    return str(value)


def _ids(obj: dict[str, Any], id_key: str, location: str, w: Walk) -> tuple[str | None, str | None]:
    """(task id, context id) of a task (`id`) or an event (`taskId`), each noted when not a string."""
    tid, cid = obj.get(id_key), obj.get("contextId")
    if tid is None:
        tid = get(obj, id_key)  # (its proto name)
    if cid is None:
        cid = obj.get("context_id")
    if (tid is None or tid.__class__ is str) and (cid is None or cid.__class__ is str):  # (the rule)
        return tid or None, cid or None
    return id_text(tid, f"{location}.{id_key}", w.anomalies), id_text(cid, f"{location}.contextId", w.anomalies)


def _dict_or_none(obj: dict[str, Any], key: str, location: str, w: Walk) -> dict[str, Any] | None:
    """A member that must be an object: None when absent, and when of another type (said so)."""
    value = obj.get(key)
    if value is None or value.__class__ is dict or isinstance(value, dict):
        return value
    w.anomalies.append(f"wrong_type:{location}.{key}={type(value).__name__}")
    return None


def walk_result(value: Any, location: str, w: Walk) -> None:
    """Walk one response object (JSON-RPC `result`, REST body, or one SSE event's object)."""
    if not isinstance(value, dict):
        w.anomalies.append(f"result_not_object:{location}")
        return
    kind = value.get("kind")
    if isinstance(kind, str) and kind in _KINDS:
        _walk_kind(_KINDS[kind], value, location, w)
        return
    if kind is not None:  # (the object is still read by its shape, as one without `kind`)
        said = f"unknown_enum:{location}.kind={clip(kind)}" if isinstance(kind, str) else None
        w.anomalies.append(said or f"wrong_type:{location}.kind={type(kind).__name__}")
    wrapped = [k for k in value if k in _WRAPPERS]
    if wrapped and w.v03 and "status" in value and "id" in value:
        wrapped = []  # a bare Task with a stray `message` member (python-a2a's echoes the user's there): no wrapper
    if wrapped:
        if w.v03 and not w.v03_said:  # v0.3 JSON-RPC results are the object itself, named by `kind`
            w.anomalies.append(f"v1.0_shape_in_v0.3:{location}.{wrapped[0]}")  # (fasta2a answers so)
            w.v03_said = True
        if len(wrapped) > 1:
            w.anomalies.append(f"several_wrapper_keys:{','.join(wrapped)}")
        for k in wrapped:
            inner = value[k]
            if isinstance(inner, dict):
                _walk_kind(_WRAPPERS[k], inner, f"{location}.{k}", w)
            else:
                w.anomalies.append(f"wrong_type:{location}.{k}={type(inner).__name__}")
        return
    if "status" in value and "id" in value:  # bare Task (GetTask, CancelTask, SubscribeToTask snapshot)
        _walk_kind("task", value, location, w)
    elif ("messageId" in value or "message_id" in value) and (
        "parts" in value or "content" in value or "role" in value
    ):
        _walk_kind("message", value, location, w)
    elif isinstance(value.get("tasks"), list):  # ListTasks
        odd: str | None = None
        for i, t in enumerate(value["tasks"]):
            if isinstance(t, dict):
                _walk_task(t, f"{location}.tasks[{i}]", w, summarise=False)
            elif t is not None and odd is None:
                odd = f"wrong_type:{location}.tasks[{i}]={type(t).__name__}"
                w.anomalies.append(odd)
    elif value.get("tasks") is not None:
        w.anomalies.append(f"wrong_type:{location}.tasks={type(value['tasks']).__name__}")
    elif get(value, "taskId") is not None and "status" in value:  # a bare status update without kind (lenient)
        _walk_kind("statusUpdate", value, location, w)


def _walk_kind(kind: str, obj: dict[str, Any], location: str, w: Walk) -> None:
    w.event_kinds.append(kind)
    if kind == "task":
        _walk_task(obj, location, w, summarise=True)
    elif kind == "message":
        task_id, context_id = _ids(obj, "taskId", location, w)
        _sight(w, Sighting(location, "message", kind, obj, task_id, context_id))
        _summarise(w, task_id, context_id, None)
    elif kind == "statusUpdate":
        task_id, context_id = _ids(obj, "taskId", location, w)
        final = obj.get("final")
        if final is not None and not isinstance(final, bool):  # (v0.3: the stream's last event says `true`)
            w.anomalies.append(f"wrong_type:{location}.final={type(final).__name__}")
        status = _dict_or_none(obj, "status", location, w)
        state = None
        if status is not None:
            state = normalise_state(status.get("state"), w.anomalies)
            if w.stamps:
                _stamp(status.get("timestamp"), location, w)
            msg = status.get("message")
            if msg is not None and msg.__class__ is not dict:  # (the place named only when it is said)
                msg = _dict_or_none(status, "message", f"{location}.status", w)
            if msg is not None:
                _sight(w, Sighting(f"{location}.status.message", "message", kind, msg, task_id, context_id, state))
        _summarise(w, task_id, context_id, state)
    elif kind == "artifactUpdate":
        task_id, context_id = _ids(obj, "taskId", location, w)
        art = _dict_or_none(obj, "artifact", location, w)
        if art is not None:
            _sight(w, Sighting(f"{location}.artifact", "artifact", kind, art, task_id, context_id))
        _summarise(w, task_id, context_id, None)


def _walk_task(task: dict[str, Any], location: str, w: Walk, summarise: bool) -> None:
    task_id, context_id = _ids(task, "id", location, w)
    status = _dict_or_none(task, "status", location, w)
    state = normalise_state(status.get("state"), w.anomalies) if status is not None else None
    if w.stamps and status is not None:
        _stamp(status.get("timestamp"), location, w)
    for key, kind in (("history", "message"), ("artifacts", "artifact")):
        items = task.get(key)
        if not isinstance(items, list):
            if items is not None:
                w.anomalies.append(f"wrong_type:{location}.{key}={type(items).__name__}")
            continue
        odd: str | None = None
        for i, item in enumerate(items):
            if len(w.sightings) >= MAX_SIGHTINGS:  # the rest counted at C speed, no Sighting made
                w.skipped += sum(1 for x in items[i:] if isinstance(x, dict))
                break
            if isinstance(item, dict):
                w.sightings.append(Sighting(f"{location}.{key}[{i}]", kind, "task", item, task_id, context_id))
            elif item is not None and odd is None:  # the first said: a list of a million of them is one oddity
                odd = f"wrong_type:{location}.{key}[{i}]={type(item).__name__}"
                w.anomalies.append(odd)
    msg = None
    if status is not None:
        msg = status.get("message")
        if msg is not None and msg.__class__ is not dict:  # (the place named only when it is said)
            msg = _dict_or_none(status, "message", f"{location}.status", w)
    if msg is not None:
        _sight(w, Sighting(f"{location}.status.message", "message", "task", msg, task_id, context_id, state))
    if summarise:
        _summarise(w, task_id, context_id, state)


# a google.protobuf.Timestamp as ProtoJSON reads it: RFC 3339 with `T`, at most nine fractional digits, and the zone
# (`Z` or an offset) that the protobuf runtime requires (without it the a2a-sdk client refuses the whole reply)
_RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(Z|[+-]\d\d:\d\d)?", re.ASCII)


def _stamp(value: Any, location: str, w: Walk) -> None:
    """The `timestamp` of an exchange's first status (one look per exchange: agents stamp their statuses alike),
    said when no ProtoJSON reader takes it: `timestamp_without_zone` (a local time, as Python's `isoformat()` writes
    a naive one), `timestamp_invalid` (no RFC 3339 date-time), `wrong_type` (no string)."""
    w.stamps = False
    if value is None:
        return
    if value.__class__ is str:
        m = _RFC3339.fullmatch(value)
        if m is not None and m.group(1) is not None:
            return
        kind = "timestamp_invalid" if m is None else "timestamp_without_zone"
        w.anomalies.append(f"{kind}:{location}.status.timestamp")
    else:
        w.anomalies.append(f"wrong_type:{location}.status.timestamp={type(value).__name__}")


def _sight(w: Walk, s: Sighting) -> None:
    if len(w.sightings) < MAX_SIGHTINGS:
        w.sightings.append(s)
    else:
        w.skipped += 1


def _summarise(w: Walk, task_id: str | None, context_id: str | None, state: str | None) -> None:
    w.task_id = task_id or w.task_id
    w.context_id = context_id or w.context_id
    w.task_state = state or w.task_state


def part_kind(part: Any) -> str:
    if not isinstance(part, dict):
        return f"invalid:{type(part).__name__}"
    kind = part.get("kind")
    if isinstance(kind, str):  # v0.3
        return kind
    for key, name in (("text", "text"), ("data", "data"), ("raw", "file"), ("url", "file"), ("file", "file")):
        if key in part:
            return name
    return "unknown"


def parts_of(obj: dict[str, Any], anomalies: list[str] | None = None) -> list[Any]:
    """A message's or artifact's parts; a `parts` of another type than a list is none (said so)."""
    key, parts = "parts", obj.get("parts")
    if parts is None:
        key, parts = "content", obj.get("content")  # v0.3 REST
    if isinstance(parts, list):
        if anomalies is not None:
            ok = _TEXT
            for p in parts:
                if p.__class__ is not dict or p.get("text").__class__ not in ok or p.get("kind").__class__ not in ok:
                    _odd_part(parts, anomalies)  # one said is enough: a stream may repeat it in every part
                    break
        return parts
    if parts is not None and anomalies is not None:
        anomalies.append(f"wrong_type:{key}={type(parts).__name__}")  # (python-a2a's `content` is one object)
    return []


_TEXT = (str, type(None))


def _odd_part(parts: list[Any], anomalies: list[str]) -> None:
    """Say the first part that is no object, or whose `text` or `kind` is no string."""
    for i, p in enumerate(parts):
        if not isinstance(p, dict):
            anomalies.append(f"wrong_type:parts[{i}]={type(p).__name__}")
            return
        for key in ("text", "kind"):
            value = p.get(key)
            if value is not None and not isinstance(value, str):
                anomalies.append(f"wrong_type:parts[{i}].{key}={type(value).__name__}")
                return


def text_and_kinds(obj: dict[str, Any], anomalies: list[str]) -> tuple[str | None, list[str]]:
    """A message's or artifact's text and part kinds: `parts_of`, then `text_of` and each part's `part_kind`, in
    one pass over parts that are all objects whose `text` and `kind` are strings or absent (what agents send);
    else (an odd part, which `parts_of` notes) those functions as they are."""
    parts = obj.get("parts")
    if parts is None:
        parts = obj.get("content")  # v0.3 REST
    if parts.__class__ is list:
        texts: list[str] = []
        kinds: list[str] = []
        for p in parts:
            if p.__class__ is not dict:
                break
            text, kind = p.get("text"), p.get("kind")
            if kind is None:
                kind = "text" if text.__class__ is str else part_kind(p)  # (part_kind looks for `text` first)
            elif kind.__class__ is not str:
                break
            if text.__class__ is str:
                texts.append(text)
            elif text is not None:
                break
            kinds.append(kind)
        else:
            return "\n".join(texts) if texts else None, kinds
    parts = parts_of(obj, anomalies)
    return text_of(parts), [part_kind(p) for p in parts]


def text_of(parts: list[Any]) -> str | None:
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(texts) if texts else None


def extensions_of(obj: dict[str, Any], anomalies: list[str]) -> list[str]:
    ext = obj.get("extensions")
    if ext is None:
        return []
    if not isinstance(ext, list):
        anomalies.append(f"wrong_type:extensions={type(ext).__name__}")
        return []
    kept = [e for e in ext if isinstance(e, str)]
    if len(kept) < len(ext):
        anomalies.append(f"wrong_type:extensions[]={type(next(e for e in ext if not isinstance(e, str))).__name__}")
    if len(kept) > MAX_URIS:  # the rest counted; the converse extension's kept wherever it stands
        anomalies.append(f"uris_not_recorded:extensions:{len(kept)}")
        later = CONVERSE_URI in kept[MAX_URIS:] and CONVERSE_URI not in kept[:MAX_URIS]
        kept = kept[:MAX_URIS] + ([CONVERSE_URI] if later else [])
    return kept
