"""`converse-tap record` under a service manager's environment: no home directory it can write (systemd's
DynamicUser, HOME=/nonexistent), where an s3:// dataset's journals go by default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_an_unwritable_home_names_the_journal_folder_and_journal_dir(tmp_path: Path) -> None:
    """The local journal folder is checked first, without the network, and the error says which option moves it
    (it named `--out` and the bucket, after a round trip to the storage)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "XDG_"))}
    env.update(
        HOME="/proc/nonexistent",  # not even root can make a folder there
        AWS_ENDPOINT_URL="http://127.0.0.1:1",  # nothing listens: the storage is never reached
        AWS_ACCESS_KEY_ID="test",
        AWS_SECRET_ACCESS_KEY="test",
        AWS_EC2_METADATA_DISABLED="true",
    )
    r = subprocess.run(
        [sys.executable, "-m", "converse_tap", "record", "--out", "s3://bucket/prefix", "--listen-port", "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("Error: cannot keep the journals of --out s3://bucket/prefix in the default journal")
    assert "/proc/nonexistent" in r.stderr and "give --journal-dir DIR" in r.stderr
    assert "Traceback" not in r.stderr and "recording" not in r.stdout + r.stderr
