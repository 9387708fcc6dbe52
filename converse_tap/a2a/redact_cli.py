"""Credentials in command lines and `.netrc` lines quoted in free text (an agent's reply that shows how it called a
service, an error that echoes the command that failed).

`command_lines(text)` replaces
- the password of a `user:password` after a user option: `curl -u ann:…`, `curl --user ann:…`, `--proxy-user`,
  HTTPie's `-a ann:…` / `--auth ann:…` (a `uid:gid` of digits, Docker's `-u 1000:1000`, stays);
- the value after an option named for a credential and a space: `--password …`, `--token …`, `--api-key …`,
  `-client-secret …` (with `=`, `redact_named.key_values` reads it; `--password-stdin`, `--token-file` name none);
- a MySQL client's password glued to `-p` (`mysql -u root -p…`, `-p'…'`, where the text names `mysql` or
  `mariadb`), the value after `-p` where the text names a `login` or `sshpass` (`docker login -u ann -p …`), and
  after `-a` where it names `redis` (`redis-cli -a …`);
- the password of a `.netrc` entry: `machine api.test login ann password …`, `default login ann password …`.

Each rule is a regular expression read once from where an option or a `machine` word starts, with bounded or
possessive repeats: linear. A value that is a word said about the option (`--password required`) stays.
"""

from __future__ import annotations

import re

from .redact_prose import STATUS_WORDS
from .redact_secrets import REDACTED, is_secret_text_name

_OPEN = r"(?<![A-Za-z0-9_.:/\\%+@-])"  # an option starts a word of the command line (after a space, quote, `,`...)
# an option's value: quoted (to its closing quote), or a bare word that is no option itself
_VALUE = r"(?:\"(?P<dq>[^\"\r\n]++)|'(?P<sq>[^'\r\n]++)|(?P<bare>(?!-)[^\s'\"]++))"
_USER_OPTION = re.compile(
    rf"{_OPEN}(?:-[uUa][ \t]*+|--(?:user|proxy-user|auth|basic-auth|digest-auth)(?:[ \t]++|=))"
    r"[\"']?+(?P<user>[^\s:'\"]{0,256}+):(?P<pw>[^\s'\"]++)"
)
_NAMED_OPTION = re.compile(rf"{_OPEN}--?(?P<name>[A-Za-z][A-Za-z0-9_-]{{1,63}}+)[ \t]++{_VALUE}")
_GLUED_P = re.compile(rf"{_OPEN}-p{_VALUE}")  # `mysql -psecret`, `mysqldump -p'secret'`
_SPACED_P = re.compile(rf"{_OPEN}-p[ \t]++{_VALUE}")  # `docker login -p secret`, `sshpass -p secret`
_SPACED_A = re.compile(rf"{_OPEN}-a[ \t]++{_VALUE}")  # `redis-cli -a secret`
_SPACE = r"[ \t\r\n]++"
_TOKEN = r"[^\s'\"]++"
_PAIRS = rf"(?:{_SPACE}(?:login|account|port|machine){_SPACE}{_TOKEN})"
_NETRC = re.compile(
    rf"(?i){_OPEN}(?:machine{_SPACE}{_TOKEN}{_PAIRS}{{0,4}}+|default{_PAIRS}{{1,4}}+){_SPACE}"
    rf"(?:password|passwd)[ \t]++{_VALUE}"
)
_UID_GID = re.compile(r"[0-9]++")
# words one of which every option name `_NAMED_OPTION` takes holds (`is_secret_text_name`'s, and `bearer`)
_OPTION_WORDS = ("pass", "pw", "secret", "token", "key", "sig", "credential", "sess", "cookie", "auth", "sid", "bearer")


def may_hold_command(text: str) -> bool:
    """Whether the option rules that no secret-named word marks may change `text` (`-u ann:…`, `-p…`): substring
    tests only. The others (`--password …`, `.netrc`) need a word `redact_named.may_hold_key_value` looks for."""
    return "-u" in text or "-U" in text or "-a" in text or "-p" in text


def _value(text: str, m: re.Match[str], group: str, out: list[str], pos: int) -> int:
    """Append the text before the value of `group` and the marker to `out`; the position after the value. A value
    said about the option (a word of STATUS_WORDS) or redacted already stays."""
    start, end = m.span(group)
    value = text[start:end]
    if start < pos or value == REDACTED or value.lower() in STATUS_WORDS or value.startswith(REDACTED):
        return pos
    out += [text[pos:start], REDACTED]
    return end


def _replace(text: str, rule: re.Pattern[str]) -> str:
    out: list[str] = []
    pos = 0
    for m in rule.finditer(text):
        if rule is _USER_OPTION:
            if _UID_GID.fullmatch(m.group("user")) and _UID_GID.fullmatch(m.group("pw")):
                continue  # a user and group id, not a password
            pos = _value(text, m, "pw", out, pos)
            continue
        if rule is _NAMED_OPTION:
            name = m.group("name")
            if not is_secret_text_name(name) and "bearer" not in name.lower():  # (curl's `--oauth2-bearer`)
                continue
        group = "dq" if m.group("dq") is not None else "sq" if m.group("sq") is not None else "bare"
        pos = _value(text, m, group, out, pos)
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def command_lines(text: str) -> str:
    """`text` with the credentials of the command lines and `.netrc` entries this module's doc lists replaced."""
    low = text.lower()
    if ":" in text and ("-u" in text or "-U" in text or "-a" in text):
        text = _replace(text, _USER_OPTION)
    if "-" in text and any(word in low for word in _OPTION_WORDS):
        text = _replace(text, _NAMED_OPTION)
    if "-p" in text:
        if "mysql" in low or "mariadb" in low:
            text = _replace(text, _GLUED_P)
        if "login" in low or "sshpass" in low:
            text = _replace(text, _SPACED_P)
    if "-a" in text and "redis" in low:
        text = _replace(text, _SPACED_A)
    if ("machine" in low or "default" in low) and "passw" in low:
        text = _replace(text, _NETRC)
    return text
