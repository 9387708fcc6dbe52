"""Headless Chromium for tests: Debian's `chromium`, installed with apt-get when missing (CI starts bare)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def _apt_get(*args: str) -> None:
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # other processes may hold the dpkg lock for a while: wait for it instead of failing
    subprocess.run([*prefix, "apt-get", "-o", "DPkg::Lock::Timeout=900", *args], check=True, env=env, timeout=1800)


def ensure_chromium() -> str:
    """The path of a Chromium binary; installs Debian's `chromium` package when there is none."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    if shutil.which("apt-get") is None:
        pytest.fail("these tests need Chromium: install the `chromium` package (no apt-get here to do it)")
    try:
        _apt_get("update", "-q")
        _apt_get("install", "-y", "-q", "--no-install-recommends", "chromium")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError) as e:
        pytest.fail(f"installing Debian's chromium failed ({e}); install it by hand: apt-get install chromium")
    found = shutil.which("chromium")
    if not found:
        pytest.fail("apt-get installed chromium but no `chromium` binary is on PATH")
    return found


def dump_dom(chromium: str, page: Path) -> str:
    """Load a local page in a fresh profile, let its timers run, and return the DOM as the page left it."""
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        r = subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                "--virtual-time-budget=3000",  # timers and load/error events run out before the dump
                "--dump-dom",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    if r.returncode != 0 or "<html" not in r.stdout:
        raise AssertionError(f"chromium failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout
