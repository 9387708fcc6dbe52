import pytest

from converse_tap.a2a.card import card_fields
from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from tests.factories import EXT, a2a_flow


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


def test_a_cards_lists_are_recorded_up_to_a_bound() -> None:
    """`{}` is three bytes of a card's interfaces, skills or tools, and each became a dict in the card's row (and
    each tool without a skill an anomaly): a 900 KB card was 300,000 of them, 90 MB and seconds of the worker, a
    16 MiB card gigabytes. Past MAX_CARD_ITEMS the rest of a list is counted, not recorded."""
    from converse_tap.a2a.card import MAX_CARD_ITEMS

    n = MAX_CARD_ITEMS + 500
    items = b",".join([b"{}"] * n)
    skills = b",".join(b'{"id": "t%d"}' % i for i in range(n))
    tools = b",".join(b'{"toolName": "t%d"}' % i for i in range(n))
    ext_uri = EXT.encode()
    body = b'{"name": "c", "supportedInterfaces": [' + items + b'], "skills": [' + skills + b'], "capabilities": '
    body += b'{"extensions": [{"uri": "' + ext_uri + b'", "params": {"mcp": {}, "tools": [' + tools + b"]}}]}}"
    flow = a2a_flow(method="GET", path="/.well-known/agent-card.json", response=body)
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None
    card = ext.agent_cards[0]
    assert len(card["interfaces"]) == len(card["skill_ids"]) == len(card["tools"]) == MAX_CARD_ITEMS
    assert card["tools_match_skills"] is True and len(card["anomalies"]) < 10
    for name in ("supportedInterfaces", "skills", "tools"):
        assert f"card_items_not_recorded:{name}:{n}" in card["anomalies"]
