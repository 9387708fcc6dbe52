"""What a credential's value looks like in prose, where only its name marks it (`Password: hunter`, `the API key
is abcdef`, `Bearer abcdefghijklmnop`), and what is no value but a word about it (`Password: required`).

- `strong_name(low)`: names whose every value is a credential (passwords, secrets, API and private keys,
  credentials, access and refresh tokens). In prose their value goes unless it starts with a word of
  `STATUS_WORDS` (`required`, `expired`, `must`, `the`...) or is a count (`Password: 8 characters`); a value of
  several words goes up to a delimiter, a sentence's end or the next such word.
- `looks_generated(value)`: for the other names (`token`, `session`, `Bearer`, a webhook path's segments): a run
  that reads as generated, not as a word: a digit in 6+ characters, mixed case in 16+, or 12+ letters of one case
  with three letter pairs that English words hardly hold (`qx`, `jz`, `vk`...).
"""

from __future__ import annotations

import re

# letter pairs rare inside English words and identifiers (under 3 in 100,000 pairs of the words of this project's
# documents and of Python's standard library): a run of random letters holds one in every 2.6 pairs
_RARE = (
    "a:hoq b:fhknqvwxz c:bgjwxz d:hkqwxz e:j f:bcghjkmpqvwxz g:bdfjkqwxyz h:bcfghjkpqvwxz i:hjwy "
    "j:bcdfghijklmnpqrtvwxyz k:bcfhjkmoqvxyz l:hjqxz m:cfghjqrvwxz n:qwxz o:hy p:bgjmqvwxz "
    "q:bcdefghijkmnopqrstvwxyz r:hjqxz s:bjvxz t:gjkqx u:hjkquvwyz v:bcfghjklmnpqrstuvwxyz "
    "w:bcfgjkmpqtuvwxyz x:bdfghjkmnoquvwxz y:hjkquvxyz z:bcdfghjklnpqrstuvwxz"
)
RARE_PAIRS = frozenset(head[0] + c for head in _RARE.split() for c in head[2:])
_LETTER_RUN = re.compile(r"[A-Za-z]{2,}")
_DIGIT = re.compile(r"[0-9]")
_UPPER = re.compile(r"[A-Z]")
_LOWER = re.compile(r"[a-z]")


def random_letters(text: str, at_least: int = 12) -> bool:
    """Whether the letters of `text` (`at_least` of them, case aside) hold three pairs rare in words: a random
    run of 16 letters does 19 times in 20, words and identifiers (`processincomingevents`) about 1 in 200. Pairs
    are read within each run of letters only (`slack-notifications`: not `kn`)."""
    rare = letters = 0
    for m in _LETTER_RUN.finditer(text):
        run = m.group().lower()
        letters += len(run)
        for i in range(len(run) - 1):
            if run[i : i + 2] in RARE_PAIRS:
                rare += 1
    return rare >= 3 and letters >= at_least


def looks_generated(value: str) -> bool:
    """A value that reads as generated, not as a word (see the module's doc)."""
    n = len(value)
    if n < 6:
        return False
    if _DIGIT.search(value):
        return True
    if n >= 16 and _UPPER.search(value) and _LOWER.search(value):
        return True
    return n >= 12 and random_letters(value)


# a name whose value is a credential whatever it reads as (lower case, separators kept): not `token` or `session`
# alone (`token: expired`, `session: 3 of 5`), which go only with a value that `looks_generated`
_STRONG = re.compile(
    r"passw|passphrase|pwd|secret|credential|(?:api|private|access|account|signing|auth|subscription)[-_. ]?key|"
    r"(?:access|refresh|auth|bearer|session|id|client|api|bot|webhook|notification)[-_. ]?token"
)


def strong_name(low: str) -> bool:
    return bool(_STRONG.search(low))


# words that start what is said about a credential rather than the credential (case aside): its state, what it
# must be, function words. A value in prose that starts with one of them stays, with the rest of its sentence
_STATUS = """
    a an the this that these those it its is was are were be been being has have had do does did not no nor none
    null nil n/a na to of in on at by for from with without as if or and but so than then there here which who
    what when where whose while must should shall can cannot could will would may might need needs needed
    required require requires missing invalid expired expires expiring incorrect wrong empty blank unset set
    reset changed unchanged change updated update rotated rotate revoked disabled enabled locked unlocked
    accepted rejected refused denied granted pending approved ok okay valid verified unverified unknown optional
    provided given present
    absent hidden masked redacted omitted removed sent stored saved too weak strong short long same new old
    mismatch mismatched failed failure error errors see above below field fields value values hint policy rules
    yes true false please only any all each every at least most minimum maximum min max chars characters
    length your my our their his her one two three four five six seven eight nine ten kept used shown logged
    printed ignored read written case-sensitive sensitive different secure insecure stale string str int integer
    number bool boolean bytes list dict object array type
"""
STATUS_WORDS = frozenset(_STATUS.split())
_HEAD_WORD = re.compile(r"[A-Za-z/-]{1,16}+(?![A-Za-z0-9_/-])|[0-9]{1,2}(?![0-9A-Za-z])")
# a value in prose: a run without spaces or delimiters; its trailing punctuation (`hunter.`) is the sentence's
_RUN = re.compile(r"[^\s'\"<>\\(){}\[\],;]++")
_NEXT_RUN = re.compile(r"[ \t]++([^\s'\"<>\\(){}\[\],;]++)")
_TRAILING = ".:!?"
MAX_WORDS = 8  # a passphrase in prose is read this many words far at most


def prose_value(text: str, pos: int) -> tuple[int, int] | None:
    """The span of a strong name's value in prose that starts at `pos`, or None when it is a status word, a count
    or nothing. Several words (`correct horse battery staple`) up to a delimiter, a sentence's end, a word of
    STATUS_WORDS, a `name=`/`name:` or MAX_WORDS words; linear: each run is read once, or twice when it ends
    the value."""
    head = _HEAD_WORD.match(text, pos)
    if head is not None and (head.group()[0].isdigit() or head.group().lower() in STATUS_WORDS):
        return None
    m = _RUN.match(text, pos)
    if m is None:
        return None
    end = m.end()
    words = 1
    while words < MAX_WORDS and text[end - 1] not in _TRAILING:
        nxt = _NEXT_RUN.match(text, end)
        if nxt is None:
            break
        word = nxt.group(1)
        if "=" in word or word[-1] == ":" or word.rstrip(_TRAILING).lower() in STATUS_WORDS:
            break
        end, words = nxt.end(), words + 1
    while end > pos and text[end - 1] in _TRAILING:
        end -= 1
    return (pos, end) if end > pos else None
