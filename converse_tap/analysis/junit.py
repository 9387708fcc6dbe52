"""`converse-tap check --format junit`: the check's outcomes as JUnit XML, the report format CI systems read
(GitLab, Jenkins, GitHub test reporters): one test case per threshold and scope (all, or each agent), a failing
threshold as a <failure> carrying the examples behind it."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from xml.etree import ElementTree as ET

from ..textsafe import xml_safe
from .gate import Outcome

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _safe(text: str) -> str:
    """XML 1.0 has no place for most control characters (or lone surrogates): each becomes U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def junit_xml(
    outcomes: list[Outcome],
    describe: Callable[[Outcome], str],
    examples: dict[tuple[str, str], list[dict[str, Any]]] | None = None,
    suite: str = "converse-tap check",
    timestamp: datetime | None = None,
) -> str:
    """The outcomes as a <testsuites> document. `describe` gives an outcome's one-line verdict (as the text
    output prints it); `examples` maps (scope, metric) to the examples behind a failed threshold."""
    examples = examples or {}
    failures = sum(not o.passed for o in outcomes)
    stamp = (timestamp or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S")
    root = ET.Element("testsuites", name=suite, tests=str(len(outcomes)), failures=str(failures), errors="0", time="0")
    ts = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(outcomes)),
        failures=str(failures),
        errors="0",
        skipped="0",
        time="0",
        timestamp=stamp,
    )
    for o in outcomes:
        case = ET.SubElement(
            ts,
            "testcase",
            classname=_safe(f"converse-tap.check.{o.scope}"),
            name=_safe(f"{o.metric} ({o.scope})"),
            time="0",
        )
        verdict = _safe(describe(o))
        if o.passed:
            ET.SubElement(case, "system-out").text = verdict
            continue
        failure = ET.SubElement(case, "failure", message=verdict, type="threshold")
        found = examples.get((o.scope, o.metric), [])
        lines = [verdict]
        if found:
            lines.append("examples:")
            lines += [
                f"  {e['conversation']}  {e['agent'] or '-'}  {e['at'] or ''}  {e['key']}"
                + (f"  {e['text']}" if e["text"] else "")
                for e in found
            ]
        failure.text = _safe("\n".join(lines))
    ET.indent(root)
    # C1 controls, bidi and other format characters are XML characters, but raw they act on a terminal the file is
    # printed to: written as character references, the document is the same
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + xml_safe(ET.tostring(root, encoding="unicode")) + "\n"
