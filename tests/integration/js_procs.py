"""The @a2a-js/sdk peer of the integration tests (tests/integration/js/): its npm install, cached outside the
repository, its agent process and its client run."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.integration.procs import Proc

JS_DIR = Path(__file__).with_name("js")
SCRIPTS = ("server.mjs", "client.mjs")
MANIFESTS = ("package.json", "package-lock.json")
READY = re.compile(r"^READY (\{.*\})$")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:  # CI machines have Node.js 20: a missing one is a broken set-up, not a reason to skip
        raise RuntimeError(f"{name} not found on PATH: the @a2a-js/sdk integration tests need Node.js >= 20 and npm")
    return path


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "converse-tap-tests"


def node_modules() -> Path:
    """node_modules for tests/integration/js, installed once per lockfile by `npm ci` into the user's cache and
    reused: `~/.cache/converse-tap-tests/js-<sha256 of package.json and package-lock.json>/node_modules`."""
    _tool("node")
    npm = _tool("npm")
    digest = hashlib.sha256(b"".join((JS_DIR / m).read_bytes() for m in MANIFESTS)).hexdigest()[:16]
    home = cache_root() / f"js-{digest}"
    done = home / "node_modules" / ".converse-tap-installed"
    if done.exists():
        return home / "node_modules"
    cache_root().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"js-{digest}-", dir=cache_root()))  # installed aside, then renamed
    try:
        for m in MANIFESTS:
            shutil.copyfile(JS_DIR / m, work / m)
        _run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"], work, f"npm ci in {work}", timeout=600)
        (work / "node_modules" / ".converse-tap-installed").write_text(digest)
        try:
            work.rename(home)
        except OSError:  # another run installed the same lockfile meanwhile: use its copy
            if not done.exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return home / "node_modules"


def workdir(where: Path) -> Path:
    """A directory holding the scripts beside a link to the cached node_modules, as node resolves packages."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "node_modules").symlink_to(node_modules(), target_is_directory=True)
    for name in SCRIPTS:
        shutil.copyfile(JS_DIR / name, where / name)
    return where


@contextmanager
def js_agent(work: Path, cert: Path, key: Path) -> Iterator[dict[str, int]]:
    """server.mjs on free ports of 127.0.0.1; yields {"http": port, "grpc": port} once it says it listens."""
    proc = Proc([_tool("node"), "server.mjs", str(cert), str(key)], cwd=work)
    try:
        yield json.loads(proc.wait_for(READY).group(1))
    finally:
        proc.stop(signal.SIGTERM)


def run_client(work: Path, base: str, proxy: str, ca: Path, runs: list[str]) -> dict[str, Any]:
    """client.mjs through `proxy` (HTTP by undici's ProxyAgent, gRPC by grpc-js's `grpc_proxy`); its ground truth."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in {"http_proxy", "https_proxy", "no_proxy"}}
    env |= {"grpc_proxy": proxy, "no_grpc_proxy": "", "NODE_NO_WARNINGS": "1"}
    truth: dict[str, Any] = json.loads(
        _run([_tool("node"), "client.mjs", base, proxy, str(ca), *runs], work, "client.mjs", env=env, timeout=120)
    )
    return truth


def _run(args: list[str], cwd: Path, what: str, env: dict[str, str] | None = None, timeout: float = 120) -> str:
    """A command's standard output; its whole output in the error when it fails."""
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{what} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


RUNS = [f"{b}:{v}:{m}" for v in ("1.0", "0.3") for b in ("JSONRPC", "HTTP+JSON", "GRPC") for m in ("unary", "stream")]


def record(tmp: Path) -> tuple[Path, Path, dict[str, Any]]:
    """Every run of RUNS through one mitmdump with the addon, also saving its flows: (dataset, flow file, truth)."""
    from converse_tap.demo.grpc_agent import self_signed
    from tests.integration.grpc_procs import proxy_options
    from tests.integration.procs import mitmdump

    work = workdir(tmp / "js")
    key, cert = self_signed()
    (tmp / "key.pem").write_bytes(key)
    (tmp / "cert.pem").write_bytes(cert)
    out, flows, conf = tmp / "live", tmp / "flows.mitm", tmp / "conf"
    opts = ("-w", str(flows), "--set", "store_streamed_bodies=true", *proxy_options(conf))
    with js_agent(work, tmp / "cert.pem", tmp / "key.pem") as ports, mitmdump(out, *opts) as (proxy, proc):
        truth = run_client(work, f"http://127.0.0.1:{ports['http']}", proxy, conf / "mitmproxy-ca-cert.pem", RUNS)
    assert proc.popen.returncode == 0, proc.output
    return out, flows, truth
