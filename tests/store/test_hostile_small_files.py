"""A dataset's `_text_policy` and `_salt` that no writer made: garbage, binary, huge, JSON, a FIFO. Ingest refuses
the policy with exit 2 saying what it should hold; nothing blocks on a FIFO; `show --text hash` says the salt is
not one."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from converse_tap.store.files import TextPolicyUnreadable, dataset_salt, dataset_text_policy
from tests.captures import write_capture
from tests.cli_helpers import invoke

ROOT = Path(__file__).parents[2]

POLICIES: dict[str, Callable[[Path], object]] = {
    "garbage": lambda p: p.write_text("whatever\n"),
    "binary": lambda p: p.write_bytes(b"\xff\xfe\x00keep"),
    "json": lambda p: p.write_text('{"policy": "keep"}'),
    "huge": lambda p: p.write_bytes(b"keep" + b" " * (1 << 20)),
    "directory": lambda p: p.mkdir(),
    "fifo": lambda p: os.mkfifo(p),
}


@pytest.mark.parametrize("kind", sorted(POLICIES))
def test_a_text_policy_file_no_writer_made_is_refused_not_trusted(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "data"
    root.mkdir()
    POLICIES[kind](root / "_text_policy")
    with pytest.raises(TextPolicyUnreadable) as e:
        dataset_text_policy(root)
    assert "should hold one of keep, hash, drop" in str(e.value)
    capture = write_capture(tmp_path / "c.mitm", 2)
    # a subprocess with a timeout: an ingest blocked on a FIFO fails the test instead of hanging it
    r = subprocess.run(
        [sys.executable, "-m", "converse_tap", "ingest", str(capture), "--out", str(root)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "text policy file" in r.stderr and "should hold one of keep, hash, drop" in r.stderr
    assert not (root / "exchanges").exists()


def test_a_valid_text_policy_is_read_as_before(tmp_path: Path) -> None:
    (tmp_path / "_text_policy").write_text("hash\n")
    assert dataset_text_policy(tmp_path) == "hash"
    assert dataset_text_policy(tmp_path / "nowhere") is None


@pytest.mark.parametrize("kind", ["fifo", "huge"])
def test_a_salt_no_writer_made_blocks_nothing(sample: Path, tmp_path: Path, kind: str) -> None:
    root = tmp_path / "data"
    subprocess.run(["cp", "-r", str(sample), str(root)], check=True)
    POLICIES[kind](root / "_salt")
    with pytest.raises(OSError, match="not the dataset's salt"):
        dataset_salt(root)
    r = subprocess.run(
        [sys.executable, "-m", "converse_tap", "show", str(root), "c1", "--text", "hash"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "not the dataset's salt" in r.stderr
    assert invoke("show", str(root), "c1").exit_code == 0  # the text as recorded needs no salt
