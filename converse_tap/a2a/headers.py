"""A small case-insensitive, multi-valued header view that both mitmproxy flows and HAR entries fit into."""

from __future__ import annotations

from collections.abc import Iterable

from .constants import CONVERSE_URI, MAX_URIS
from .redact import NO_OPERATOR_PATTERNS, Redaction


class Headers:
    __slots__ = ("_items",)

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        self._items = [(k.lower(), v) for k, v in items]

    def get(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self._items:
            if k == name:
                return v
        return None

    def get_all(self, name: str) -> list[str]:
        name = name.lower()
        return [v for k, v in self._items if k == name]

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
    return list(seen)
