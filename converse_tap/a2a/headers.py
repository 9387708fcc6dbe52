"""A small case-insensitive, multi-valued header view that both mitmproxy flows and HAR entries fit into."""

from __future__ import annotations

from collections.abc import Iterable

from .constants import CONVERSE_URI, CONVERSE_URI_BASE, MAX_URIS
from .envelope import clip
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


def activated(values: list[str], uris: list[str], what: str, anomalies: list[str]) -> bool:
    """Whether header `values` (split into `uris`, redacted) hold the converse extension's exact URI, as a server
    compares it; if not, the near misses among `uris` are named (`uri_variants`). The URIs as sent are looked at:
    redaction lower-cases a scheme and drops a fragment or userinfo, so `HTTPS://…` or `…/v1#x` is stored as the
    exact URI, which it is not."""
    if CONVERSE_URI in uris and exact_uri(values):
        return True
    if uris:
        uri_variants(uris, what, anomalies)
    return False


def exact_uri(values: list[str]) -> bool:
    """Whether header values hold the converse extension's exact URI as an item, as a server compares it (the
    stored URIs are redacted, which lower-cases a scheme and drops a fragment or userinfo)."""
    for value in values:
        if value == CONVERSE_URI:  # (the common case: the one URI, alone)
            return True
    return any(uri.strip() == CONVERSE_URI for value in values for uri in value.split(","))


def uri_variants(uris: list[str], what: str, anomalies: list[str]) -> None:
    """Say the URIs of a list without the converse extension's exact URI that look meant for it: the spec's "Check
    that A2A-Extensions holds the exact URI, including the v1 at the end". `extension_uri_variant:<what>:<uri>`
    (another case, a trailing slash, quotes: not the extension, so not `converse_requested`) or
    `extension_other_version:<what>:<uri>` (`…/v2`: another version of it, which this page does not describe)."""
    for uri in uris:
        if "a2a-converse-extension" not in uri.lower():  # (the one test most lists fail)
            continue
        text = uri.strip("\"' <>").rstrip("/").lower()
        if text.startswith(_BASE):
            rest = text[len(_BASE) :]
            version = rest[1:] if rest[:1] == "v" else ""
            odd = "other_version" if version.isdigit() and version.isascii() and rest != "v1" else "uri_variant"
        else:
            odd = "uri_variant"
        anomalies.append(f"extension_{odd}:{what}:{clip(uri)}")


_BASE = CONVERSE_URI_BASE.lower()
_SPLIT: dict[str, tuple[str, ...]] = {}  # header value -> its URIs (values of up to SHORT_TEXT characters)
_SPLIT_MAX = 1024
