"""One dataset, one text policy: the first writer records it, every later writer must match it."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

from converse_tap.cli import cli
from converse_tap.store.files import TextPolicyConflict, claim_text_policy, dataset_text_policy, is_dataset
from converse_tap.store.reader import load
from tests.factories import agent_message, jsonrpc_result


def test_the_first_claim_records_the_policy_and_a_different_one_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "data"
    assert dataset_text_policy(root) is None
    claim_text_policy(root, "hash")
    claim_text_policy(root, "hash")  # the same policy again: fine
    assert (dataset_text_policy(root), is_dataset(root)) == ("hash", True)
    with pytest.raises(TextPolicyConflict) as e:
        claim_text_policy(root, "keep")
    assert (e.value.dataset_policy, e.value.wanted) == ("hash", "keep")
    assert "--text hash" in str(e.value)
    assert sorted(p.name for p in root.iterdir()) == ["_text_policy"]  # no temporary file left
    assert (root / "_text_policy").stat().st_mode & 0o777 == 0o600


def test_concurrent_first_claims_agree_on_one_policy(tmp_path: Path) -> None:
    root = tmp_path / "data"
    wanted = ["keep", "drop"] * 8

    def claim(policy: str) -> str:
        try:
            claim_text_policy(root, policy)
            return policy
        except TextPolicyConflict as e:
            return e.dataset_policy

    with ThreadPoolExecutor(8) as pool:
        seen = set(pool.map(claim, wanted))
    assert seen == {dataset_text_policy(root)}  # every writer saw the one policy that won, never an empty file


def _har(path: Path) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": "u", "role": "ROLE_USER", "parts": [{"text": "hello"}]}}}  # fmt: skip
    entry = {
        "startedDateTime": "2026-12-01T10:00:00.000Z",
        "time": 12.5,
        "request": {
            "method": "POST",
            "httpVersion": "HTTP/1.1",
            "url": "http://agent.test/a2a",
            "headers": [],
            "postData": {"mimeType": "application/json", "text": json.dumps(body)},
        },
        "response": {
            "status": 200,
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "Content-Type", "value": "application/json"}],
            "content": {
                "mimeType": "application/json",
                "text": jsonrpc_result({"message": agent_message()}, rid=1).decode(),
            },
        },
    }
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": [entry]}}))


def test_ingest_records_its_policy_and_refuses_another(tmp_path: Path) -> None:
    _har(tmp_path / "a.har")
    out = tmp_path / "data"
    first = CliRunner().invoke(cli, ["ingest", str(tmp_path / "a.har"), "--out", str(out), "--text", "drop"])
    assert first.exit_code == 0, first.stderr
    assert dataset_text_policy(out) == "drop"
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    r = CliRunner().invoke(cli, ["ingest", str(tmp_path / "a.har"), "--out", str(out)])  # --text keep by default
    assert r.exit_code == 2
    assert r.stderr == (
        f"Error: the dataset {out} holds message text under the 'drop' policy, not 'keep': "
        f"use --text drop for it, or another dataset directory for 'keep'\n"
    )
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # nothing read, nothing written
    assert load(out, "messages")["text"].isna().all()
