"""Text from the wire made safe for an HTML page: the one escaping helper of the HTML report, its charts and its
drill-down."""

from __future__ import annotations

import html

from .textsafe import safe_line, safe_text


def html_text(text: object, multiline: bool = False) -> str:
    """Text from the wire for an HTML page (element text or a quoted attribute value): shown as `safe_line` (or,
    `multiline`, `safe_text`) shows it on a terminal, then HTML-escaped. A page renders a bidi override, a zero-width
    character or a control character as a reordering or as nothing, so that `ag\\u202egnp.exe` reads `agexe.png` and
    two agents look alike: here each is its visible escape, as in the text and Markdown reports."""
    return html.escape(safe_text(text) if multiline else safe_line(text), quote=True)
