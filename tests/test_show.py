"""`show` names a conversation by its id or by a unique prefix of it, whatever the number of conversations."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import invoke
from tests.test_output_hunt import ANSWERED, _flow, _write


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """120 conversations whose ids share their first 10 characters (`conv-aaaa-000` to `conv-aaaa-119`)."""
    flows = [_flow(f"m{i}", {"answerCoverage": ANSWERED}, i, ctx=f"conv-aaaa-{i:03d}") for i in range(120)]
    return _write(tmp_path_factory.mktemp("show") / "d", flows)


@pytest.mark.parametrize("given", ["conv-aaaa-119", "conv-aaaa-11", "conv-aaaa-1", "conv-aaaa-00", "conv-aaaa-07…"])
def test_a_prefix_names_a_conversation_only_when_it_starts_exactly_one(many: Path, given: str) -> None:
    """A prefix shared by more than the 50 ids a look for close matches samples used to be resolved among those
    50: one of two conversations it starts could be shown as if it were the only one, or none found."""
    starts = [f"conv-aaaa-{i:03d}" for i in range(120) if f"conv-aaaa-{i:03d}".startswith(given.rstrip("…"))]
    r = invoke("show", str(many), given)
    if len(starts) == 1:
        assert r.exit_code == 0, r.stderr
        assert r.stdout.startswith(f"conversation {starts[0]} "), r.stdout[:200]
    else:
        assert r.exit_code == 2 and r.stdout == ""
        assert "starts several conversations" in r.stderr and starts[0] in r.stderr, r.stderr


def test_an_unknown_id_is_named_with_close_ones(many: Path) -> None:
    r = invoke("show", str(many), "conv-aaab-005")
    assert r.exit_code == 2 and "no conversation 'conv-aaab-005'" in r.stderr and "conv-aaaa-005" in r.stderr
