"""HTTP+JSON routes and agent card paths: which operation a request's path and verb name, read as the agent's
router reads them (percent-decoded when only the decoded path is a route)."""

from __future__ import annotations

import re
from urllib.parse import unquote

CARD_PATH = re.compile(r"^(?P<base>.*?)/\.well-known/(?:agent-card|agent)\.json$")
_CARD_ENDS = ("/agent-card.json", "/agent.json")
# Task ids are opaque and may hold `:` (`/tasks/task:42`): the last `:segment` of a task's path is its verb only
# when it is a known one (`:cancel`, `:subscribe`, `:resubscribe`, also written `%3A`, as a router that decodes
# the path reads it), else it is part of the id. `_NO_VERB` ends the id of a route without a verb.
_VERBS = ("cancel", "subscribe", "resubscribe")
_NO_VERB = "".join(f"(?<!:{v})(?<!%3[Aa]{v})" for v in _VERBS)
# (pattern, verbs, operation, certain, (endings, or a part the path's tail must hold)). Order matters: the specific
# before the generic. Every route's fixed part lies in the last four segments of a path (`_tail`), and a path
# that ends otherwise is not matched at all: the patterns cost about 10 ns per character each, so a 64 KiB path
# run through all of them cost the proxy's event loop 6-8 ms.
REST_ROUTES: list[tuple[re.Pattern[str], frozenset[str], str, bool, tuple[str, ...]]] = [
    (re.compile(r"^(?P<base>.*?)/message:send$"), frozenset({"POST"}), "SendMessage", True, ("/message:send",)),
    (
        re.compile(r"^(?P<base>.*?)/message:stream$"),
        frozenset({"POST"}),
        "SendStreamingMessage",
        True,
        ("/message:stream",),
    ),
    (
        re.compile(r"^(?P<base>.*?)/tasks/(?P<task>[^/]+):cancel$"),
        frozenset({"POST"}),
        "CancelTask",
        True,
        (":cancel",),
    ),
    (
        re.compile(r"^(?P<base>.*?)/tasks/(?P<task>[^/]+):(?:subscribe|resubscribe)$"),
        frozenset({"POST", "GET"}),
        "SubscribeToTask",
        True,
        (":subscribe", ":resubscribe"),
    ),
    (
        re.compile(r"^(?P<base>.*?)/tasks/(?P<task>[^/]+)/pushNotificationConfigs(?:/(?P<cfg>[^/]+))?$"),
        frozenset({"POST", "GET", "DELETE"}),
        "PushNotificationConfig",
        True,
        ("*/pushNotificationConfigs",),
    ),
    (
        re.compile(r"^(?P<base>.*?)/extendedAgentCard$"),
        frozenset({"GET"}),
        "GetExtendedAgentCard",
        True,
        ("/extendedAgentCard",),
    ),
    (
        re.compile(rf"^(?P<base>.*?)/tasks/(?P<task>[^/]+){_NO_VERB}$"),
        frozenset({"GET"}),
        "GetTask",
        False,
        ("*/tasks/",),
    ),
    (re.compile(r"^(?P<base>.*?)/tasks$"), frozenset({"GET"}), "ListTasks", False, ("/tasks",)),
    (re.compile(r"^(?P<base>.*?)/v1/card$"), frozenset({"GET"}), "GetExtendedAgentCard", False, ("/v1/card",)),
]


_SHORT_PATH = 256


def _tail(path: str) -> tuple[str, str]:
    """(head, tail): the path cut before its last four segments, where every route's fixed part lies."""
    cut = path.rsplit("/", 4)
    if len(cut) < 5:
        return "", path
    tail = "/" + "/".join(cut[1:])
    return path[: len(path) - len(tail)], tail


def _could_be(tail: str, hints: tuple[str, ...]) -> bool:
    """Whether the path's tail ends with one of `hints`, or holds a `*`-marked one."""
    return any(tail.find(h[1:]) >= 0 if h[0] == "*" else tail.endswith(h) for h in hints)


def match_route(path: str, verb: str) -> tuple[int, re.Match[str], str] | None:
    """(index in REST_ROUTES, match on the tail, head) of the first route the path takes, or None."""
    if len(path) <= _SHORT_PATH:  # the patterns themselves are cheapest on a path of ordinary length
        for i, (pattern, verbs, _, _, _) in enumerate(REST_ROUTES):
            if verb in verbs:
                m = pattern.match(path)
                if m is not None:
                    return i, m, ""
        return None
    head, tail = _tail(path)
    for i, (pattern, verbs, _, _, hints) in enumerate(REST_ROUTES):
        if verb in verbs and _could_be(tail, hints):
            m = pattern.match(tail)
            if m is not None:
                return i, m, head
    return None


def match_card(path: str) -> str | None:
    """The base of an agent card's well-known path, or None."""
    if not path.endswith(_CARD_ENDS):
        return None
    head, tail = _tail(path)
    m = CARD_PATH.match(tail)
    return None if m is None else head + m["base"]


def is_route(path: str, verb: str) -> bool:
    if verb == "GET" and match_card(path) is not None:
        return True
    return match_route(path, verb) is not None


def routed(path: str, verb: str) -> tuple[str, list[str]]:
    """The path as the agent's router reads it: ASGI servers (and most frameworks) route on the percent-decoded
    path, so `/v1/message%3Asend` is SendMessage there. A route found only once decoded is said so."""
    if "%" not in path or is_route(path, verb):
        return path, []
    decoded = _decoded_route(path, verb)
    return (path, []) if decoded is None else (decoded, ["path_percent_encoded"])


PROBE = 2048  # characters at the end of a path decoded first: unquote costs some 50 ns a character


def _decoded_route(path: str, verb: str) -> str | None:
    """The percent-decoded path, when it is a route; decoded whole only when its end is one."""
    if not is_route(unquote(path[-PROBE:]), verb):
        return None
    decoded = unquote(path)
    return decoded if decoded != path and is_route(decoded, verb) else None
