"""Agent Card parsing (v1.0 and v0.3 shapes): interfaces, skills, and the converse declaration."""

from __future__ import annotations

from typing import Any

from . import urls
from .constants import CONVERSE_URI
from .envelope import clip
from .headers import uri_variants
from .redact import NO_OPERATOR_PATTERNS, Redaction, redact_card_json, stored_json

# entries of each list a card row records (interfaces, skills, tools): `{}` is three bytes of a card, and each
# entry is a dict of the row; past this the rest of a list is counted (card_items_not_recorded:<list>:<length>)
MAX_CARD_ITEMS = 1000


def _items(value: Any, name: str, anomalies: list[str]) -> list[Any]:
    """A list of the card as given (anything else: none), cut to MAX_CARD_ITEMS, saying so."""
    if not isinstance(value, list):
        return []
    if len(value) > MAX_CARD_ITEMS:
        anomalies.append(f"card_items_not_recorded:{name}:{len(value)}")
        return value[:MAX_CARD_ITEMS]
    return value


# the type each field of an Agent Card (v1.0 and v0.3) has: a field of another type is read as absent, and said so
_CARD_TYPES: dict[str, type] = {
    "name": str,
    "version": str,
    "description": str,
    "protocolVersion": str,
    "url": str,
    "preferredTransport": str,
    "iconUrl": str,
    "documentationUrl": str,
    "supportedInterfaces": list,
    "additionalInterfaces": list,
    "skills": list,
    "capabilities": dict,
    "provider": dict,
    "defaultInputModes": list,
    "defaultOutputModes": list,
}
_ITEM_FIELDS = {
    "supportedInterfaces": ("url", "protocolBinding", "protocolVersion"),
    "additionalInterfaces": ("url", "transport"),
}


def _check_types(card: dict[str, Any], anomalies: list[str]) -> None:
    for name, kind in _CARD_TYPES.items():
        value = card.get(name)
        if value is not None and not isinstance(value, kind):
            anomalies.append(f"wrong_type:card.{name}={type(value).__name__}")
    for name, fields in _ITEM_FIELDS.items():
        items = card.get(name)
        for i, item in enumerate(items[:MAX_CARD_ITEMS] if isinstance(items, list) else []):
            if not isinstance(item, dict):
                anomalies.append(f"wrong_type:card.{name}[{i}]={type(item).__name__}")
                continue
            for field in fields:
                value = item.get(field)
                if value is not None and not isinstance(value, str):
                    anomalies.append(f"wrong_type:card.{name}[{i}].{field}={type(value).__name__}")
    skills = card.get("skills")
    for i, skill in enumerate(skills[:MAX_CARD_ITEMS] if isinstance(skills, list) else []):
        if not isinstance(skill, dict) or not isinstance(skill.get("id"), str):
            anomalies.append(f"wrong_type:card.skills[{i}].id")
    caps = card.get("capabilities")
    exts = caps.get("extensions") if isinstance(caps, dict) else None
    if exts is not None and not isinstance(exts, list):
        anomalies.append(f"wrong_type:card.capabilities.extensions={type(exts).__name__}")
    for i, ext in enumerate(exts[:MAX_CARD_ITEMS] if isinstance(exts, list) else []):
        if not isinstance(ext, dict):
            anomalies.append(f"wrong_type:card.capabilities.extensions[{i}]={type(ext).__name__}")
        elif not isinstance(ext.get("uri"), str):
            anomalies.append(f"wrong_type:card.capabilities.extensions[{i}].uri={type(ext.get('uri')).__name__}")


def _str_noted(obj: dict[str, Any], key: str, where: str, anomalies: list[str]) -> str | None:
    """A string member of the converse declaration; one of another type is read as absent, and said so."""
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        anomalies.append(f"wrong_type:{where}={type(value).__name__}")
    return _str(value)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def card_fields(card: Any, anomalies: list[str], redaction: Redaction = NO_OPERATOR_PATTERNS) -> dict[str, Any]:
    """Flatten a card into the agent_cards columns (without exchange-level fields).

    Every URL it stores (interfaces, MCP endpoint and server card, and any URL inside `card_json`: icons,
    documentation, provider...) is redacted first; a card in which redaction finds a credential anywhere is
    flattened from its redacted copy, so no column (name, skills, tool names, anomalies) keeps one.
    """
    card_json = None
    out = _fields(card, anomalies)
    _url_anomalies(out, anomalies)  # of the URLs as sent: a redacted copy of an odd URL may read as a sound one
    if isinstance(card, dict):
        text = stored_json(card)
        card_json = redact_card_json(card, redaction, text)
        if card_json is not text:
            out = _fields(redaction.json_urls(card), [])  # its anomalies were noted from the card as sent
    for itf in out["interfaces"]:
        itf["url"] = redaction.maybe_url(itf["url"])
    out["mcp_url"] = redaction.maybe_url(out["mcp_url"])
    out["mcp_server_card_url"] = redaction.maybe_url(out["mcp_server_card_url"])
    if out["card_json"] is not None:
        out["card_json"] = card_json
    return out


def _url_anomalies(out: dict[str, Any], anomalies: list[str]) -> None:
    for i, itf in enumerate(out["interfaces"]):
        # a gRPC interface may be written `host:port`: no scheme is no oddity there
        found = urls.anomalies(itf["url"], f"interfaces[{i}].url")
        anomalies += [a for a in found if not a.startswith(("url_malformed:scheme:", "url_malformed:no_scheme:"))]
    anomalies += urls.anomalies(out["mcp_url"], "mcp.url") + urls.anomalies(
        out["mcp_server_card_url"], "mcp.serverCardUrl"
    )


def _fields(card: Any, anomalies: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": None,
        "version": None,
        "description": None,
        "protocol_version": None,
        "interfaces": [],
        "skill_ids": [],
        "converse_declared": False,
        "converse_required": None,
        "mcp_url": None,
        "mcp_server_card_url": None,
        "tools": [],
        "tools_match_skills": None,
        "unmatched_tools": [],
        "card_json": None,
    }
    if not isinstance(card, dict):
        anomalies.append(f"card_not_object:{type(card).__name__}")
        return out
    out["card_json"] = ""  # set, redacted, by card_fields
    _check_types(card, anomalies)
    out["name"] = _str(card.get("name"))
    out["version"] = _str(card.get("version"))
    out["description"] = _str(card.get("description"))
    out["protocol_version"] = _str(card.get("protocolVersion"))

    interfaces = []
    for itf in _items(card.get("supportedInterfaces"), "supportedInterfaces", anomalies):
        if isinstance(itf, dict):
            interfaces.append(
                {
                    "url": _str(itf.get("url")),
                    "binding": _str(itf.get("protocolBinding")),
                    "protocol_version": _str(itf.get("protocolVersion")),
                }
            )
    if not interfaces and _str(card.get("url")):  # v0.3 shape
        # an interface is a url and transport pair: the main one, and each additional one not already listed
        # (the spec says the list SHOULD repeat the main pair; one URL may serve several transports)
        main = (card["url"], _str(card.get("preferredTransport")) or "JSONRPC")
        seen: set[tuple[str | None, str | None]] = {main}
        interfaces.append({"url": main[0], "binding": main[1], "protocol_version": _str(card.get("protocolVersion"))})
        for itf in _items(card.get("additionalInterfaces"), "additionalInterfaces", anomalies):
            if not isinstance(itf, dict):
                continue
            pair = (_str(itf.get("url")), _str(itf.get("transport")))
            if pair not in seen:
                seen.add(pair)
                interfaces.append(
                    {"url": pair[0], "binding": pair[1], "protocol_version": _str(card.get("protocolVersion"))}
                )
    out["interfaces"] = interfaces

    skills = _items(card.get("skills"), "skills", anomalies)
    out["skill_ids"] = [s["id"] for s in skills if isinstance(s, dict) and isinstance(s.get("id"), str)]

    caps = card.get("capabilities")
    exts = caps.get("extensions") if isinstance(caps, dict) else None
    decl = None
    declared = 0
    for ext in exts if isinstance(exts, list) else []:  # (an int here raised TypeError: the card was lost)
        if isinstance(ext, dict):
            uri = ext.get("uri")
            if uri == CONVERSE_URI:
                decl = decl or ext
                declared += 1
            elif isinstance(uri, str):
                uri_variants([uri], "card", anomalies)  # (`…/v1/`, another case, `…/v2`: not declared, said)
    if decl is None:
        return out
    if declared > 1:  # the first read, as A2A clients look an extension up
        anomalies.append(f"card_converse_declared_more_than_once:{declared}")
    out["converse_declared"] = True
    required = decl.get("required", False)  # A2A's AgentExtension: `required` defaults to false
    out["converse_required"] = required if isinstance(required, bool) else None
    if required is not None and not isinstance(required, bool):
        anomalies.append(f"wrong_type:card.converse.required={type(required).__name__}")
    if required is True:
        anomalies.append("card_converse_required_true")
    params = decl.get("params")
    if not isinstance(params, dict):
        anomalies.append("card_converse_params_missing")
        return out
    mcp = params.get("mcp")
    if isinstance(mcp, dict):
        out["mcp_url"] = _str_noted(mcp, "url", "params.mcp.url", anomalies)
        out["mcp_server_card_url"] = _str_noted(mcp, "serverCardUrl", "params.mcp.serverCardUrl", anomalies)
        url, server_card = out["mcp_url"], out["mcp_server_card_url"]
        if url and server_card and not server_card.startswith(url.rstrip("/") + "/"):
            anomalies.append("card_server_card_not_under_mcp_url")
    elif mcp is not None:
        anomalies.append(f"wrong_type:params.mcp={type(mcp).__name__}")
    else:
        anomalies.append("card_converse_mcp_missing")
    tools = params.get("tools")
    if tools is None:  # the spec: "Empty when none is exposed", so present
        anomalies.append("card_converse_tools_missing")
    elif not isinstance(tools, list):
        anomalies.append(f"wrong_type:params.tools={type(tools).__name__}")
        tools = []
    skill_ids = set(out["skill_ids"])
    names: set[Any] = set()
    said: set[str] = set()  # kinds of oddity said of a tool: each once, naming the first tool (a card lists 1,000)

    def once(kind: str, detail: str) -> None:
        if kind not in said:
            said.add(kind)
            anomalies.append(f"{kind}{detail}")

    for t in _items(tools, "tools", anomalies):
        if not isinstance(t, dict):
            anomalies.append("wrong_type:params.tools[]")
            continue
        name = t.get("toolName")
        if name is None:
            once("missing:params.tools[].toolName", "")
        elif isinstance(name, str) and name in names:  # "one entry per routine"
            once("card_tool_listed_twice", f":{clip(name)}")
        names.add(name if isinstance(name, str) else None)
        schema = t.get("inputSchema")
        if schema is None:
            once("card_tool_schema_missing", f":{clip(name)}")
        elif not isinstance(schema, dict):
            anomalies.append(f"card_tool_schema_not_object:{clip(name)}")
        elif schema.get("type", "object") != "object":  # built from the routine's slots: an object of them
            once("card_tool_schema_type", f":{clip(name)}={clip(schema.get('type'))}")
        required_fields = schema.get("required") if isinstance(schema, dict) else None
        if required_fields is not None and not isinstance(required_fields, list):
            # JSON Schema's `required` is a list of names: a string's characters or an object's keys are not
            anomalies.append(f"wrong_type:params.tools[].inputSchema.required={type(required_fields).__name__}")
            required_fields = None
        elif required_fields and not all(isinstance(f, str) for f in required_fields):
            anomalies.append("wrong_type:params.tools[].inputSchema.required[]")
        out["tools"].append(
            {
                "tool_name": _str_noted(t, "toolName", "params.tools[].toolName", anomalies),
                "description": _str_noted(t, "description", "params.tools[].description", anomalies),
                "input_schema_json": None if schema is None else stored_json(schema),
                "required_fields": [f for f in required_fields or [] if isinstance(f, str)],
            }
        )
    unmatched = [t["tool_name"] for t in out["tools"] if t["tool_name"] not in skill_ids]
    out["unmatched_tools"] = [u for u in unmatched if u is not None]
    out["tools_match_skills"] = not unmatched
    for name in out["unmatched_tools"]:  # (a tool without a name is said above)
        anomalies.append(f"card_tool_without_skill:{clip(name)}")
    return out
