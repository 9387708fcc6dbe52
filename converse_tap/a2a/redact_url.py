"""Credentials in one URL: userinfo, secret query and path parameters, named segments, credential shapes.

The built-in rules of `redact.Redaction.url` (`_builtin`), and the credential shapes free-text redaction looks
for too. Percent-encoding is undone (a few rounds, bounded) before a path segment or a query value is checked,
and a URL carried inside a query value (`?next=https%3A%2F%2F…%3Ftoken%3D…`, `?back=/cb?code=…`) is redacted as
a URL itself, a few levels deep at most; a query value, decoded, is read as free text too (`?q=Authorization%3A+…`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache, wraps
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from . import urls
from .redact_b64 import encoded_secrets
from .redact_named import key_values, may_hold_key_value
from .redact_secrets import REDACTED as REDACTED
from .redact_secrets import hook_path, is_hook_host, wide_shapes

SECRET_NAME = re.compile(
    r"(auth|token|secret|passw|pwd|^pass$|passcode|passphrase|^pw$|session|sess_?id|cookie|api[-_]?key|apikey|"
    r"key$|^key|signature|^sig$|hmac|^sid$|credential|bearer|jwt|access[-_]?code|^code$|^otp$|^ticket$|saml)",
    re.IGNORECASE,
)
_B64 = r"[A-Za-z0-9_-]"
# credential shapes wherever they sit in a URL (path segments, query values) or a string of a stored document:
# a JWS/JWE (header is base64url JSON, so it starts "eyJ") and the prefixes of well-known API keys; and (in
# `_shape`) three base64url runs of 12+ characters joined by dots, the first with a capital letter (host names
# are written in lower case)
# A key prefix starts after anything but a letter or digit: `\b` missed one glued to an underscore
# (`ROLE_sk-…`, `token_ghp_…`)
_START = "(?<![A-Za-z0-9])"
# (also: a JWT cut after its payload, as an error message clipped to 500 characters holds it; Slack `xoxe-` and
# `xapp-`, AWS temporary `ASIA…`, Hugging Face `hf_`, npm `npm_`, Stripe `whsec_`, Google OAuth client secrets
# `GOCSPX-` and access tokens `ya29.`, Shopify `shpat_`, SendGrid `SG.….…`, and a Telegram bot token's secret
# half, `AA…` after `<bot id>:`)
_SHAPES = re.compile(
    rf"(?<![A-Za-z0-9_-])eyJ{_B64}*(?:\.{_B64}*){{2,4}}|(?<![A-Za-z0-9_-])eyJ{_B64}{{8,}}\.{_B64}{{8,}}"
    rf"|{_START}(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{{12,}}|{_START}sk-[A-Za-z0-9_-]{{16,}}"
    rf"|{_START}gh[pousr]_[A-Za-z0-9]{{20,}}|{_START}github_pat_[A-Za-z0-9_]{{20,}}|{_START}glpat-[A-Za-z0-9_-]{{16,}}"
    rf"|{_START}xox[abprse]-[A-Za-z0-9-]{{10,}}|{_START}xapp-[A-Za-z0-9-]{{10,}}"
    rf"|{_START}(?:AKIA|ASIA)[0-9A-Z]{{16}}\b|{_START}AIza[0-9A-Za-z_-]{{35}}"
    rf"|{_START}hf_[A-Za-z0-9]{{30,}}|{_START}npm_[A-Za-z0-9]{{36}}|{_START}whsec_[A-Za-z0-9]{{24,}}"
    rf"|{_START}GOCSPX-[A-Za-z0-9_-]{{24,}}|{_START}ya29\.[A-Za-z0-9_-]{{20,}}"
    rf"|{_START}shp(?:at|ca|pa|ss)_[a-fA-F0-9]{{32}}|{_START}SG\.[A-Za-z0-9_-]{{16,}}\.[A-Za-z0-9_-]{{16,}}"
    r"|(?<=[0-9]:)AA[A-Za-z0-9_-]{31,34}(?![A-Za-z0-9_-])"
    # the keys of model and tool providers agents hold (Groq, Replicate, Perplexity, xAI, LangSmith, Tavily,
    # Pinecone) and of services they call (PyPI, Databricks, DigitalOcean, Linear, Notion, Vault, Grafana, Sentry,
    # Atlassian)
    rf"|{_START}gsk_[A-Za-z0-9]{{40,}}|{_START}r8_[A-Za-z0-9]{{30,}}|{_START}pplx-[A-Za-z0-9]{{40,}}"
    rf"|{_START}xai-[A-Za-z0-9]{{40,}}|{_START}lsv2_(?:pt|sk)_[A-Za-z0-9_]{{30,}}"
    rf"|{_START}tvly-(?:dev-|prod-)?[A-Za-z0-9]{{20,}}|{_START}pcsk_[A-Za-z0-9_]{{40,}}"
    rf"|{_START}pypi-AgE[A-Za-z0-9_-]{{50,}}|{_START}dapi[0-9a-f]{{32}}|{_START}do[opr]_v1_[0-9a-f]{{64}}"
    rf"|{_START}lin_api_[A-Za-z0-9]{{40,}}|{_START}(?:secret|ntn)_[A-Za-z0-9]{{43,}}|{_START}hv[sb]\.[A-Za-z0-9_-]{{24,}}"
    rf"|{_START}gl(?:sa|c)_[A-Za-z0-9_-]{{32,}}|{_START}sntr[ysu]s_[A-Za-z0-9_-]{{40,}}|{_START}ATATT3[A-Za-z0-9_=-]{{50,}}"
)
_SHAPE_HINTS = ("eyJ", "sk", "pk_", "rk_", "gh", "github_pat_", "glpat-", "xox", "xapp-", "AKIA", "ASIA", "AIza")
_SHAPE_HINTS_MORE = ("hf_", "npm_", "whsec_", "AA", "GOCSPX-", "ya29.", "shp", "SG.")
_PROVIDER_HINTS = ("gsk_", "r8_", "pplx-", "xai-", "lsv2_", "tvly-", "pcsk_", "pypi-", "dapi", "_v1_", "lin_api_")
_SERVICE_HINTS = ("secret_", "ntn_", "hvs.", "hvb.", "glsa_", "glc_", "sntr", "ATATT3")
# any hint as a substring, in one scan
_HINT = re.compile("|".join(map(re.escape, _SHAPE_HINTS + _SHAPE_HINTS_MORE + _PROVIDER_HINTS + _SERVICE_HINTS)))
# every shape is a run of these characters at least this long: text without such a run is let through at once
_CANDIDATE = re.compile(r"[A-Za-z0-9_.-]{14,}")
# `;name=value` path parameters (`;jsessionid=...`): the value of a secret-looking name
_PATH_PARAM = re.compile(r";([^;/=?#]*)=([^;/?#]*)")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def _shape(m: re.Match[str]) -> str:
    """One run of token characters, with the shapes in it replaced (cheap tests first: runs are mostly words).
    The shapes are looked for in the whole text, within the run: what stands before it counts (`<bot id>:`)."""
    token = m.group()
    if token.count(".") == 2:
        segments = token.split(".")
        if all(len(x) >= 12 for x in segments) and any(c.isupper() for c in segments[0]):
            return REDACTED
    if not _HINT.search(token):
        return token
    text, (start, end) = m.string, m.span()
    out, pos = [], start
    for found in _SHAPES.finditer(text, start, end):
        out += [text[pos : found.start()], REDACTED]
        pos = found.end()
    if not out:
        return token
    out.append(text[pos:end])
    return "".join(out)


def redact_shapes(text: str) -> str:
    """Credential shapes (JWTs, long dotted tokens, API-key prefixes, PEM private keys, AWS key pairs) anywhere in
    `text` replaced, and credentials written in base64 (`redact_b64`)."""
    text = wide_shapes(text)
    if _CANDIDATE.search(text):
        text = _CANDIDATE.sub(_shape, text)
    return encoded_secrets(text)


# a path segment after one that names a credential (`/token/T`, `/api-keys/K`, `/password/P`): a key carried in
# the path without a shape of its own. Whole names only: `/authors/x` and `/sessions/x` stay
_NAMED_SEGMENT = re.compile(
    r"(?i)(/(?:(?:api|access|auth|bearer|refresh|id)[-_]?)?(?:keys?|tokens?|secrets?|passwords?|passwd|pwd|"
    r"credentials?|signatures?|sig|jwt|bearer)/)([^/;?#]+)"
)
_DECODE_ROUNDS = 3  # `%2574oken` is `%74oken` is `token`: percent-encoding undone this many times at most
_MAX_NEST = 3  # a URL in a query value of a URL in a query value… is redacted this many levels deep


def unquote_all(text: str, plus: bool = False) -> str:
    """`text` with its percent-encoding undone, repeatedly (bounded): what a chain of decoders may read."""
    for i in range(_DECODE_ROUNDS):
        if "%" not in text and not (plus and i == 0 and "+" in text):
            break
        decoded = unquote_plus(text) if plus and i == 0 else unquote(text)
        if decoded == text:
            break
        text = decoded
    return text


def _path_as_written(path: str, hook_host: bool = False) -> str:
    def param(m: re.Match[str]) -> str:
        return f";{m.group(1)}={REDACTED}" if is_secret_name(m.group(1)) else m.group(0)

    if ";" in path:
        path = _PATH_PARAM.sub(param, path)
    if "/" in path:
        path = hook_path(_NAMED_SEGMENT.sub(rf"\1{REDACTED}", path), hook_host)
    if "/bot" in path:  # a Telegram bot's token, whatever it reads as: `/bot<id>:<token>/sendMessage`
        path = _BOT_TOKEN.sub(rf"\1{REDACTED}", path)
    return redact_shapes(path)


_BOT_TOKEN = re.compile(r"(/bot[0-9]{3,16}+:)(?!\[REDACTED\])[^/;?#]++")


_SEGMENT_SAFE = "!$&'()*+,;=:@[]-._~%"


def _path(path: str, hook_host: bool = False) -> str:
    """The path with its credentials replaced: as written, and each segment as decoded (`%2E` dots of a JWT,
    `sk%2D…`, `/%74oken/…`, `;%74oken=…`). A segment that changes only when decoded is written decoded, redacted
    and encoded again; every other segment stays byte for byte (a redaction never spans a `/`)."""
    clean = _path_as_written(path, hook_host)
    if "%" not in path:
        return clean
    segments = path.split("/")
    decoded = [unquote_all(s) if "%" in s else s for s in segments]
    if decoded == segments:
        return clean
    # the decoded view keeps the path's structure: what decodes to `/`, `?`, `#` or `%` is written escaped
    view = [d.replace("%", "%25").replace("/", "%2F").replace("?", "%3F").replace("#", "%23") for d in decoded]
    found = _path_as_written("/".join(view), hook_host).split("/")
    kept = clean.split("/")
    if len(found) != len(view) or len(kept) != len(view):  # cannot happen (no rule writes a `/`): as written
        return clean
    out = [k if f == v else quote(f, safe=_SEGMENT_SAFE) for k, f, v in zip(kept, found, view, strict=True)]
    return "/".join(out)


SHORT_TEXT = 512  # strings up to this long may be kept in a cache (keys, titles, URLs); longer ones never are
_F = TypeVar("_F", bound=Callable[..., Any])


def cached_for_short(maxsize: int) -> Callable[[_F], _F]:
    """An LRU cache of a pure function whose first argument is a string from the wire, for strings of up to
    SHORT_TEXT characters: the same few agents, URLs and keys come back exchange after exchange, while a flood of
    distinct long strings is computed each time and cannot grow the process's memory through the cache.
    The cache is the wrapper's `cache` (its `cache_info()` for tests)."""

    def decorate(fn: _F) -> _F:
        cache = lru_cache(maxsize=maxsize)(fn)

        @wraps(fn)
        def call(text: str, *args: Any) -> Any:
            return cache(text, *args) if len(text) <= SHORT_TEXT else fn(text, *args)

        call.cache = cache  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return decorate


# a URL without these has nothing to take out (`%`: an encoded name, shape or nested URL)
_PLAIN = re.compile(r"[@;?#%\\\[\]\x00-\x20\x7f-\x9f\ud800-\udfff]")


def _query(query: str, depth: int) -> str:
    """Each `name=value` of a query in place: a secret name's value replaced, shapes replaced (in the text as
    written and as decoded), a URL in a value redacted as a URL, everything else byte for byte as it came."""
    out = []
    for piece in query.split("&"):
        name, eq, value = piece.partition("=")
        name = _query_part(name, -1)  # (a name is not read as a URL)
        if is_secret_name(unquote_all(name, plus=True)):
            out.append(f"{name}={REDACTED}")
        else:
            value = _query_part(value, depth)
            if ";" in value:  # `a=1;token=…`: servers that split queries at `;` too read a secret name here
                value = _SEMI_PARAM.sub(_secret_param, value)
            if "=" in value and may_hold_key_value(value):  # pairs written in one value: `?data=password=hunter`
                value = key_values(value)
            out.append(f"{name}{eq}{_value_text(value, max(depth, 0))}")
    return "&".join(out)


_SEMI_PARAM = re.compile(r";([^;=]*)=([^;]*)")


def _secret_param(m: re.Match[str]) -> str:
    return f";{m.group(1)}={REDACTED}" if is_secret_name(unquote_all(m.group(1), plus=True)) else m.group(0)


# a query value that may be a URL: `scheme:…`, a path, or anything with a query of its own
_URLISH = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,63}:|[/\\]|[^?]*\?[^=]*=")


def _query_part(raw: str, depth: int) -> str:
    """A query name or value (`depth`: how deep its URL is nested; -1, a name: not read as a URL)."""
    decoded = unquote_all(raw, plus=True)
    clean = decoded
    if depth >= 0 and _URLISH.match(decoded):
        if depth < _MAX_NEST:
            clean = _nested(decoded, depth + 1)
        elif "=" in decoded or "@" in decoded:  # nested deeper than is looked into: whatever it holds goes
            clean = REDACTED
    clean = redact_shapes(clean)
    if clean != decoded or redact_shapes(raw) != raw:
        # a value written without encoding stays so (`?back=/cb?code=[REDACTED]`): no `&` or `#` can be in it
        return clean if decoded == raw else quote_plus(clean, safe="[]:/")
    return raw


# what a free-text rule needs in a value to change it: a space, a separator, a bracket, an option's dash, an escape
_TEXTY = re.compile(r"[\s:=@(\[%/'\"-]")


def _value_text(value: str, depth: int) -> str:
    """A query value, decoded, read as free text too (a URL in it, within a sentence, redacted as `_nested` redacts
    one, while the nesting is shallower than _MAX_NEST): `?q=Authorization%3A+Bearer+…`, `?note=curl+-u+ann%3A…`,
    `?note=posted+to+https%3A//api.telegram.org/bot1%3A…`; as it is when that changes nothing."""
    if not _TEXTY.search(value):
        return value
    from .redact_text import free_text  # (redact_text imports this module: read when first needed)

    decoded = unquote_all(value, plus=True)
    text = free_text(decoded, lambda url: _nested(url, depth + 1) if depth + 1 < _MAX_NEST else url)
    if text == decoded:
        return value
    text = redact_shapes(text)
    return text if decoded == value else quote_plus(text, safe="[]:/")


def _nested(url: str, depth: int) -> str:
    """A URL inside a query value, redacted when it holds a credential (userinfo, a secret parameter, a shape),
    else as it was (not rewritten as a stored URL would be: it is a value)."""
    u = urls.parse(url)
    clean = _redact(url, depth)
    found = clean.count(REDACTED) > url.count(REDACTED) or u.userinfo is not None or _schemeless_userinfo(u)
    if not found and u.fragment:  # dropped from `clean`, but only a credential in it makes the value change
        found = _query(u.fragment, depth).count(REDACTED) > u.fragment.count(REDACTED)
    return clean if found else url


def nested_url(url: str) -> str:
    """A URL found percent-encoded in free text (`https%3A%2F%2Fu%3Apw%40h`): decoded, redacted and encoded
    again when it holds a credential, else as it was."""
    decoded = unquote_all(url)
    clean = _nested(decoded, 1)
    return url if clean == decoded else quote(clean, safe="[]")


# known schemes whose text is no authority (`mailto:ann@x.test`, `sip:bob@x.test` are addresses, not userinfo)
_OPAQUE_SCHEMES = frozenset(
    {"mailto", "sip", "sips", "tel", "urn", "data", "javascript", "xmpp", "news", "about", "blob", "cid", "mid"}
)
_HOST_PORT = re.compile(r"(?:\[[0-9A-Fa-f:.]*\]|[A-Za-z0-9._~%-]+):[0-9]{1,5}")


def _schemeless_userinfo(u: urls.Url) -> int:
    """For a URL without an authority: how much of its path is `userinfo@` when it reads as `userinfo@host:port`
    without a scheme (a gRPC interface `user:pw@grpc.agent.test:443` parses as scheme `user`), else 0."""
    if not u.opaque or u.scheme in _OPAQUE_SCHEMES:
        return 0
    path = u.path
    end = len(path)
    for stop in "/\\":
        at = path.find(stop)
        if 0 <= at < end:
            end = at
    head = path[:end]
    cut = head.rfind("@")
    # a port is what tells `user:pw@host:port` from an address (`ann@x.test`, `note:ann@x.test`), which stays
    return cut + 1 if cut >= 0 and _HOST_PORT.fullmatch(head[cut + 1 :]) else 0


@cached_for_short(4096)
def _builtin(url: str) -> str:
    if (
        url.isascii()
        and not _PLAIN.search(url)
        and not _CANDIDATE.search(url)
        and not _ODD_PORT.match(url)
        and not _NAMED_SEGMENT.search(url)
    ):
        return url  # no userinfo, parameters, query, fragment, odd text, odd port, shape or named key: nothing to do
    return _redact(url, 0)


def _redact(url: str, depth: int) -> str:
    u = urls.parse(url)  # never raises; the text made carriable (no controls, no lone surrogates)
    query = "" if u.query is None else "?" + _query(u.query, depth)
    scheme = f"{u.scheme}:" if u.scheme else ""
    if u.opaque:
        cut = _schemeless_userinfo(u)
        if cut:  # `user:pw@host:port`: the scheme was the user, so it goes too
            return f"{_path(u.path[cut:])}{query}"
        return f"{scheme}{_path(u.path)}{query}"
    host = u.host
    if {"ipv6", "host", "idna"} & set(u.problems):  # written so that any URL parser reads it back as a host
        host = quote(host, safe="!$&'()*+,;=-._~%")
    # a port that is no number may be a password whose `@` came after a `/`, `?` or `#`: it is dropped
    port = "" if u.port is None or not _DIGITS.fullmatch(u.port or "0") else f":{u.port}"
    return f"{scheme}//{host}{port}{_path(u.path, is_hook_host(host))}{query}"


_DIGITS = re.compile(r"[0-9]*")
_ODD_PORT = re.compile(r"[^/:]*:/*[^/:]*:[0-9]*[^0-9/]")  # an authority whose port is not a number
