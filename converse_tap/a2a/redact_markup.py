"""Credentials in markup quoted in free text: XML and HTML, Markdown tables, and names hidden by escapes.

- `elements(text)`: the text of an element named for a credential (`<password>…</password>`, `<apiKey>…</apiKey>`,
  WS-Security's `<wsse:Password Type="…">…</wsse:Password>`), and the `value` of an HTML `<input type="password">`;
- `tables(text)`: in a Markdown table, the cells under a header cell that names a credential (`| user | password |`
  then `| ann | … |`), and the second cell of a row whose first one names it (`| password | … |`,
  `| Authorization | … |`) when that cell is one run (a description, `| token | The token to use |`, stays); a
  cell that is a word said about the value (STATUS_WORDS: `| password | string |`) or a placeholder stays, and
  under a weak name (`token`) a value that does not look generated;
- `escaped(text, redact)`: text whose names or values are hidden by escapes (`&#112;assword=…`, `&quot;token&quot;:
  …`, `"\\u0070assword": …`): decoded (HTML character references; `\\uXXXX` escapes of letters, digits, `_` and `-`),
  redacted by `redact`, and written decoded when that changed it (else as it came).

Each rule reads its text once (elements and tags by bounded, possessive expressions; a table line by line).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from .redact_prose import STATUS_WORDS, looks_generated, strong_name
from .redact_secrets import REDACTED, hidden_text, is_secret_json_key, is_secret_text_name

# an element with text only: `<(ns:)name attributes>text</(ns:)name>`; the closing tag names the opening one
_ELEMENT = re.compile(
    r"<(?P<tag>(?:[A-Za-z_][A-Za-z0-9_.-]{0,31}+:)?(?P<name>[A-Za-z_][A-Za-z0-9_.-]{0,63}+))"
    r"(?:[ \t\r\n][^<>]{0,1024}+)?>(?P<value>[^<]{1,4096}+)</(?P=tag)[ \t\r\n]*+>"
)
_INPUT = re.compile(r"(?i)<input[ \t\r\n][^<>]{0,2048}+>")
_PASSWORD_TYPE = re.compile(r"(?i)[ \t\r\n]type[ \t]*+=[ \t]*+[\"']?password(?![A-Za-z0-9_-])")
_VALUE_ATTR = re.compile(r"(?i)([ \t\r\n]value[ \t]*+=[ \t]*+)(?:\"([^\"]*+)\"|'([^']*+)'|([^\s\"'>]++))")
# what documentation writes for a value: `$TOKEN`, `${API_KEY}`, `{{token}}`, `%TOKEN%`, `****`, `xxx`, `...`, and
# the name of the variable that holds it (`OPENAI_API_KEY`)
_PLACEHOLDER = re.compile(
    r"\$\{?[A-Za-z_][A-Za-z0-9_]{0,63}\}?|\{\{?[^{}]{1,64}\}\}?|%[A-Z_]{1,64}%|\*+|x+|X+|\.\.\.|…"
    r"|<[^<>\s]{1,64}>|[A-Z][A-Z0-9]{0,31}(?:_[A-Z0-9]{1,31}){1,8}"
)


def may_hold_markup(text: str) -> bool:
    """Whether `elements` may change `text` (the caller has seen a secret name's word in it)."""
    return "</" in text or ("<input" in text or "<INPUT" in text)


def _said(value: str) -> bool:
    """A value that is a word said about the credential, a placeholder or redacted already: it stays."""
    v = value.strip()
    return not v or REDACTED in v or v.lower() in STATUS_WORDS or _PLACEHOLDER.fullmatch(v) is not None


def _element(m: re.Match[str]) -> str:
    name = m.group("name")
    value = m.group("value")
    if not is_secret_text_name(name) or _said(value):
        return m.group()
    start = m.start("value")
    lead = len(value) - len(value.lstrip())
    trail = len(value.rstrip())
    whole, base = m.group(), m.start()
    return whole[: start - base + lead] + REDACTED + whole[start - base + trail :]


def _input(m: re.Match[str]) -> str:
    tag = m.group()
    if not _PASSWORD_TYPE.search(tag):
        return tag

    def value(v: re.Match[str]) -> str:
        found = next(g for g in v.groups()[1:] if g is not None) if any(v.groups()[1:]) else ""
        if _said(found):
            return v.group()
        quote = '"' if v.group(2) is not None else "'" if v.group(3) is not None else ""
        return f"{v.group(1)}{quote}{REDACTED}{quote}"

    return _VALUE_ATTR.sub(value, tag)


def elements(text: str) -> str:
    """`text` with the credentials of the elements and password inputs this module's doc lists replaced."""
    if "</" in text:
        text = _ELEMENT.sub(_element, text)
    if "<input" in text or "<INPUT" in text or "<Input" in text:
        text = _INPUT.sub(_input, text)
    return text


# -- Markdown tables ---------------------------------------------------------------------------------------------

_RULE_CELL = re.compile(r"[ \t]*+:?-{3,}+:?[ \t]*+")
_RUNS = re.compile(r"\S++")


def _cells(line: str) -> tuple[str, list[str], str] | None:
    """What comes before a table row (a prompt, `error: `), its cells and what comes after it, or None when `line`
    is no row: a row starts with `|` (after spaces; its last cell need not be closed), or has three."""
    start = line.find("|")
    if start < 0:
        return None
    last = line.rfind("|")
    if not line[:start].strip():
        if len(line.rstrip()) - start < 3:
            return None
        if line[last + 1 :].strip():  # `| password | x`: the last cell is not closed
            return line[:start], line[start + 1 :].split("|"), ""
    elif line.count("|") < 3:
        return None
    return line[:start], line[start + 1 : last].split("|"), line[last + 1 :]


def _hide_cell(cell: str, strong: bool, any_text: bool) -> str:
    """A cell as stored: `[REDACTED]` (a header's scheme kept), keeping its padding; or as it came. Under a weak
    name (`token`), only a value that `looks_generated`."""
    value = cell.strip().strip("`")
    if _said(value):
        return cell
    if not any_text and len(_RUNS.findall(value)) > 1:
        return cell  # a description (`| password | The user's password |`), not a value
    head = _RUNS.match(value)
    if head is not None and head.group().lower() in STATUS_WORDS:
        return cell
    if not strong and not looks_generated(value):
        return cell
    lead = cell[: len(cell) - len(cell.lstrip())]
    trail = cell[len(cell.rstrip()) :]
    return f"{lead}{hidden_text(value)}{trail}"


_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})


def _secret_cell(cell: str) -> int:
    """0 for a cell that names no credential, 1 for a weak name (`token`), 2 for a strong one (`password`). A name
    is one word, or two that make one (`API key`, `access token`), not a command (`grep password`)."""
    name = cell.strip().strip("*`_ ")
    if not name or len(name) > 64:
        return 0
    words = name.split()
    if len(words) > 2 or (len(words) == 2 and words[0].lower() not in _FIRST_WORDS):
        return 0
    low = "_".join(words).lower()
    if not is_secret_json_key(low):
        return 0
    return 2 if strong_name(low) or low in _HEADERS or "-" in low else 1


# the first of two words that name a credential together (`API key`, `client secret`, `DB password`)
_FIRST_WORDS_TEXT = """
    api access private client auth refresh bearer session signing account subscription user admin root db database
    secret webhook bot id master app
"""
_FIRST_WORDS = frozenset(_FIRST_WORDS_TEXT.split())


def _rule(line: str) -> bool:
    found = _cells(line)
    return found is not None and bool(found[1]) and all(_RULE_CELL.fullmatch(c) for c in found[1] if c.strip())


def tables(text: str) -> str:
    """`text` with the credentials of its Markdown tables replaced (see the module's doc)."""
    lines = text.split("\n")
    changed = False
    columns: dict[int, int] = {}
    for i, line in enumerate(lines):
        found = _cells(line)
        if found is None:
            columns = {}
            continue
        prefix, cells, suffix = found
        if _rule(line):
            continue
        if i + 1 < len(lines) and _rule(lines[i + 1]):  # a header row: it names the columns under it
            columns = {k: kind for k, c in enumerate(cells) if (kind := _secret_cell(c))}
            continue
        new = list(cells)
        for k, kind in columns.items():
            if k < len(new):
                new[k] = _hide_cell(new[k], kind == 2, True)
        kind = _secret_cell(cells[0]) if len(new) >= 2 and 0 not in columns and 1 not in columns else 0
        if kind:
            new[1] = _hide_cell(new[1], kind == 2, False)
        if new != cells:
            closed = len(prefix) + 1 + len("|".join(cells)) < len(line)  # (the row's last `|` is there)
            lines[i] = prefix + "|" + "|".join(new) + ("|" + suffix if closed else "")
            changed = True
    return "\n".join(lines) if changed else text


def may_hold_table(text: str) -> bool:
    return text.count("|") >= 2


# -- names and values hidden by escapes --------------------------------------------------------------------------

_UNICODE = re.compile(r"\\u00(?:[46][1-9a-fA-F]|[57][0-9aA]|3[0-9]|5[fF]|2[dD])")  # letters, digits, `_`, `-`


_ROUNDS = 3


def may_hold_escapes(text: str) -> bool:
    return ("&" in text and ("&#" in text or "&quot;" in text or "&apos;" in text)) or "\\u00" in text


def escaped(text: str, redact: Callable[[str], str]) -> str:
    """`text` decoded and redacted when its escapes hid a credential (see the module's doc), else as it came."""
    decoded = text
    for _ in range(_ROUNDS):  # `&amp;#112;` is `&#112;` is `p`
        before = decoded
        if "&" in decoded:
            decoded = html.unescape(decoded)
        if "\\u00" in decoded:
            decoded = _UNICODE.sub(lambda m: chr(int(m.group()[2:], 16)), decoded)
        if decoded == before:
            break
    if decoded == text:
        return text
    clean = redact(decoded)
    return text if clean == decoded else clean
