"""The HTML report's drill-down: a count opens the example conversations behind it (report --examples), each
linking to its transcript, embedded once per conversation at the end of the page. No server, no external file:
a few lines of inline script open the transcript a link points to (without script, the link still scrolls to it).
"""

from __future__ import annotations

import hashlib
import html
from typing import Any

from ..htmlsafe import html_text
from .charts import clip
from .transcript import envelope_lines

CSS = """
details.ex summary{cursor:pointer;color:#1565c0;text-decoration:underline dotted}
details.ex[open]{background:#fafafa}ol.ex{margin:.3em 0 .5em 1.2em;padding:0;text-align:left;min-width:28em}
ol.ex li{margin:.15em 0}ol.ex code,.tr code{font-size:.85em}.ex .when{color:#666}.ex q{color:#333}
section#transcripts details{border-top:1px solid #eee;padding:.3em 0}
section#transcripts summary{cursor:pointer}.msg{margin:.25em 0 .25em 0}.msg .who{font-weight:600}
.msg.user .who{color:#1565c0}.msg.agent .who{color:#2e7d32}.env{margin:.1em 0 .1em 1.5em;color:#555;font-size:.9em}
:target{outline:2px solid #f9a825}
"""

SCRIPT = """
function openTarget(){var t=location.hash&&document.getElementById(decodeURIComponent(location.hash.slice(1)));
if(t&&t.tagName==='DETAILS'){t.open=true;t.scrollIntoView();}}
window.addEventListener('hashchange',openTarget);window.addEventListener('DOMContentLoaded',openTarget);
"""


VALUE = 300  # characters of an id, agent or envelope line shown (cut in the middle with "…" beyond)
TEXT = 20_000  # characters of a message's text shown; `converse-tap show` prints it whole


def _short(text: str, limit: int = VALUE) -> str:
    return html_text(clip(text, limit))


def _text(text: str) -> str:
    if len(text) <= TEXT:
        return html_text(text, multiline=True)
    more = f"… ({len(text) - TEXT:,} more characters: converse-tap show prints the whole text)"
    return html_text(text[:TEXT], multiline=True) + f'<i class="when">{html.escape(more)}</i>'


def anchor(conversation: str) -> str:
    """A stable element id for a conversation's transcript (ids may hold any character; these are safe)."""
    return "t-" + hashlib.sha256(conversation.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def examples_cell(count: str, examples: list[dict[str, Any]], label: str) -> str:
    """A count that opens its examples: each conversation, agent, time and the first words of the reply."""
    items = []
    for e in examples:
        when = html_text((e["at"] or "")[:19].replace("T", " "))
        text = f" <q>{html_text(e['text'])}</q>" if e["text"] else ""
        items.append(
            f'<li><a href="#{anchor(e["conversation"])}"><code>{_short(e["conversation"])}</code></a> '
            f'{_short(e["agent"] or "–")} <span class="when">{when}</span>{text}</li>'
        )
    title = html_text(f"{len(examples)} example conversation(s) of {label}")
    return (
        f'<details class="ex"><summary title="{title}">{html_text(count)}</summary>'
        f'<ol class="ex">{"".join(items)}</ol></details>'
    )


def transcripts_section(report: dict[str, Any]) -> str:
    """Every transcript the examples name, once each, closed until a link opens it."""
    transcripts = report.get("transcripts") or {}
    if not transcripts:
        return ""
    parts = ['<section id="transcripts"><h2>Transcripts of the examples</h2>']
    for conversation, t in transcripts.items():
        agents = ", ".join(clip(a, VALUE) for a in t["agents"]) or "–"
        head = f"{clip(conversation, VALUE)} — {clip(agents, VALUE)}, {len(t['messages'])} messages"
        parts.append(f'<details id="{anchor(conversation)}" class="tr"><summary><code>{html_text(head)}</code>')
        parts.append(f"</summary>{_messages(t)}</details>")
    parts.append("</section>")
    return "\n".join(parts)


def _messages(t: dict[str, Any]) -> str:
    out = []
    for m in t["messages"]:
        who = m["role"] or m["kind"] or "?"
        if m["author"]:
            who += f" (by {m['author']})"
        if m["kind"] == "artifact":
            who = "artifact"
        when = (m["at"] or "")[11:23]
        text = _text(m["text"]) if m["text"] is not None else "<i>(no text)</i>"
        env = "".join(f'<div class="env">{_short(line)}</div>' for line in envelope_lines(m["envelope"] or {}))
        role = html_text(m["role"] or "other")
        out.append(
            f'<div class="msg {role}"><span class="when">{html_text(when)}</span> '
            f'<span class="who">{_short(who)}:</span> {text}{env}</div>'
        )
    return "".join(out)
