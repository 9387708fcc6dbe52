"""A JSON body that is not UTF-8 (RFC 8259 requires it): read by the charset its Content-Type declares, else as
UTF-8 with U+FFFD for each byte that is not, so that one odd byte costs its own characters, not the whole reply
or call. Only ever called once a parse has failed on a UnicodeDecodeError: nothing on the common path."""

from __future__ import annotations

import codecs
import functools
import re
from typing import Any

from . import fastjson

# charsets a server may declare whose decoders read each byte once (no escapes: `unicode_escape`, `punycode` and
# the like are not charsets, and some cost more than linear time), as Python's codec registry names them
_CHARSETS = (
    r"(?:iso8859-\d+|cp\d+|utf-(?:16|32)(?:-[bl]e)?|ascii|koi8-[rtu]|mac-[a-z]+|shift_jis(?:_2004|x0213)?|"
    r"euc_(?:jp|kr|jis_2004|jisx0213)|gb2312|gbk|gb18030|big5(?:hkscs)?|hz|johab|tis-620|utf-8-sig)"
)


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(the charset parameter of a Content-Type, _CHARSETS): compiled on first use, as nearly no body needs them."""
    return re.compile(r";\s*charset\s*=\s*\"?([^\";\s]{1,40})", re.IGNORECASE), re.compile(_CHARSETS)


def declared_codec(content_type: str | None) -> str | None:
    """The codec of the charset a Content-Type declares, when it is one read here and not UTF-8."""
    param, charsets = _patterns()
    m = param.search(content_type or "")
    if m is None:
        return None
    try:
        name = codecs.lookup(m.group(1)).name
    except LookupError:
        return None
    return name if charsets.fullmatch(name) else None


def loads_not_utf8(body: bytes, content_type: str | None, side: str) -> tuple[Any, str]:
    """`body`, which `fastjson.loads` refused with a UnicodeDecodeError, parsed from its text (raising as
    `fastjson.loads` does when that is no JSON either), and the anomaly that says how it was read:
    `<side>_not_utf8:<codec>` (by its declared charset) or `<side>_not_utf8` (bad bytes replaced)."""
    codec = declared_codec(content_type)
    if codec is not None:
        try:
            text = body.decode(codec)
        except UnicodeError:
            pass
        else:
            return fastjson.loads(text), f"{side}_not_utf8:{codec}"
    return fastjson.loads(body.decode("utf-8-sig", "replace")), f"{side}_not_utf8"


NOT_UTF8 = "invalid_json:UnicodeDecodeError"  # what a first parse of a body that is not UTF-8 says
