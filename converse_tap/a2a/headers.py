"""A small case-insensitive, multi-valued header view that both mitmproxy flows and HAR entries fit into."""

from __future__ import annotations

from collections.abc import Iterable

from .constants import CONVERSE_URI, MAX_URIS
from .redact import NO_OPERATOR_PATTERNS, Redaction
from .redact_url import SHORT_TEXT


class Headers:
    __slots__ = ("_items",)

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._items = [(k.lower(), v) for k, v in items]

    @classmethod
    def decoded(cls, fields: Iterable[tuple[bytes | str, bytes | str]]) -> Headers:
        """Headers of (name, value) pairs as the proxy sends them: bytes decoded as UTF-8 (undecodable bytes kept
        as surrogates), text taken as it is; in one pass."""
        h = cls.__new__(cls)
        h._items = [
            (
                (k.decode("utf-8", "surrogateescape") if isinstance(k, bytes) else k).lower(),
                v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v,
            )
            for k, v in fields
        ]
        return h

    def get(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self._items:
            if k == name:
                return v
        return None

    def get_all(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self._items if k == name]

    def get_both(self, first: str, second: str) -> list[str]:
        """`get_all(first) + get_all(second)`, in one pass (names given in lower case)."""
        values: list[str] = []
        later: list[str] | None = None
        for k, v in self._items:
            if k == first:
                values.append(v)
            elif k == second:
                if later is None:
                    later = []
                later.append(v)
        return values if later is None else values + later

    def names(self) -> list[str]:
        return [k for k, _ in self._items]


def split_uris(
    values: Iterable[str],
    redaction: Redaction = NO_OPERATOR_PATTERNS,
    notes: list[str] | None = None,
    what: str = "extensions",
) -> list[str]:
    """Comma-separated extension URIs from one or more header values: stripped, redacted like every stored URL
    (a client can send `https://ext.test/x?token=…`), de-duplicated, in order. Past MAX_URIS distinct ones the
    rest are counted in `notes` (`uris_not_recorded:<what>:<distinct>`), not kept — except the converse
    extension's, which is kept wherever it stands (whether it was asked for is a column)."""
    # one header value, as every call of a client sends it: its URIs remembered (the built-in redaction is pure)
    one = values[0] if isinstance(values, list) and len(values) == 1 and not redaction.patterns else None
    if one is not None and len(one) <= SHORT_TEXT:
        known = _SPLIT.get(one)
        if known is not None:
            return list(known)
    seen: dict[str, None] = {}
    more: set[str] | None = None  # distinct URIs past the bound: counted, not redacted nor kept
    for value in values:
        for uri in value.split(","):
            uri = uri.strip()
            if uri:
                if len(seen) < MAX_URIS:
                    seen.setdefault(redaction.url(uri), None)
                else:
                    if more is None:
                        more = set()
                    more.add(uri)
    if more:
        if notes is not None:
            notes.append(f"uris_not_recorded:{what}:{len(seen) + len(more - seen.keys())}")
        if CONVERSE_URI in more:
            seen.setdefault(CONVERSE_URI, None)
    elif one is not None and len(one) <= SHORT_TEXT:
        if len(_SPLIT) >= _SPLIT_MAX:
            _SPLIT.clear()
        _SPLIT[one] = tuple(seen)
    return list(seen)


_SPLIT: dict[str, tuple[str, ...]] = {}  # header value -> its URIs (values of up to SHORT_TEXT characters)
_SPLIT_MAX = 1024
