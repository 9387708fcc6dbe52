import pytest

from converse_tap.a2a.card import card_fields
from converse_tap.a2a.constants import CONVERSE_URI


def _card(**ext: object) -> dict[str, object]:
    return {"name": "A", "capabilities": {"extensions": [{"uri": CONVERSE_URI, "params": {}, **ext}]}}


@pytest.mark.parametrize(
    ("ext", "required", "flagged"),
    [
        ({}, False, False),  # A2A's AgentExtension.required defaults to false
        ({"required": False}, False, False),
        ({"required": True}, True, True),
        ({"required": "yes"}, None, False),  # not a boolean: unknown, not false
    ],
)
def test_an_extension_entry_without_required_is_not_required(ext: dict, required: bool | None, flagged: bool) -> None:
    anomalies: list[str] = []
    out = card_fields(_card(**ext), anomalies)
    assert (out["converse_declared"], out["converse_required"]) == (True, required)
    assert ("card_converse_required_true" in anomalies) is flagged
