"""What `converse-tap ingest` says about an ingest, and the clean-up of a dataset it created for nothing."""

from __future__ import annotations

import contextlib
from pathlib import Path

from .ingest import EMPTY, NOT_A_CAPTURE, IngestResult
from .ingest_share import NOT_STORED


def report_lines(result: IngestResult, out: str | Path) -> list[tuple[str, str]]:
    """What `converse-tap ingest` says about `result`: (level, text) pairs, level "info", "warning" or "error"."""
    lines: list[tuple[str, str]] = [("warning", f"{p}: {EMPTY}") for p in result.empty]
    if result.not_stored:
        lines.append(
            (
                "warning",
                f"{result.not_stored} response(s) have no body in the capture (streamed responses saved without "
                "`--set store_streamed_bodies=true`): their exchanges are recorded incomplete, with the anomaly "
                f"{NOT_STORED}; capture with that option to record their events",
            )
        )
    if result.write_error or result.unwritten or result.waiting:
        waiting = sum(result.waiting.values())
        text = f"{result.write_error or 'writing failed'}: {result.unwritten} rows were not written and are lost"
        if waiting:
            dirs = ", ".join(str(d) for d in result.waiting)
            text += f"; {waiting} rows wait in {dirs}: run `converse-tap recover {out}` once there is space"
        text += (
            f". Of {result.exchanges} exchanges read, the rest are in {out}; free space and run the same ingest "
            "again (exchanges already present are skipped)"
        )
        lines.append(("error", text))
    elif result.interrupted:
        lines.append(
            (
                "error",
                f"interrupted after {result.flows} flows: what was read is in {out}; the rest of the input is not. "
                "Run the same ingest again to complete it (exchanges already present are skipped)",
            )
        )
    else:
        dup = f"; {result.duplicates} flows were already present and skipped" if result.duplicates else ""
        unusable = {e.path for e in result.errors if e.reason.endswith(NOT_A_CAPTURE)}
        readable = result.files - len(unusable) - len(result.empty)
        if readable > 0 or result.flows:  # (of no capture at all: nothing was ingested, and no dataset made)
            lines.append(
                (
                    "info",
                    f"ingested {result.flows} flows from {readable} file(s): {result.exchanges} new A2A exchanges "
                    f"into {out}{dup}",
                )
            )
    lines.extend(("info", line) for line in unread_lines(result))
    lines.extend(("error", str(e)) for e in result.errors)
    if result.unlisted:
        lines.append(
            (
                "error",
                f"{result.unlisted} more records could not be read and are not listed "
                f"({result.skipped} unreadable records in all, each skipped on its own)",
            )
        )
    return lines


def not_http(result: IngestResult) -> str:
    """The flows of another type than HTTP the input held, by type, most first: `12 tcp, 3 dns flows`."""
    kinds = sorted(result.not_http.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{n} {kind}" for kind, n in kinds) + " flows"


def unread_lines(result: IngestResult) -> list[str]:
    """What the records read held that ingest does not read, said: never a summary that reads as the whole input."""
    lines = []
    if result.not_http:
        lines.append(
            f"skipped {not_http(result)}: not HTTP, and ingest reads HTTP exchanges only (A2A carried inside them, "
            "as under mitmproxy's `tcp_hosts`, is not seen)"
        )
    if result.websocket_flows:
        lines.append(
            f"skipped the {result.websocket_messages} messages of {result.websocket_flows} WebSocket connection(s): "
            "their HTTP handshakes were read, their messages are not (ingest reads HTTP exchanges only)"
        )
    return lines


def nothing_read(result: IngestResult) -> str:
    """Why an input of records without an HTTP exchange is not a successful ingest."""
    held = (
        f"only {not_http(result)}"
        if result.not_http
        else "flow files of TCP, UDP or DNS flows only, or HARs without entries"
    )
    return f"no HTTP exchange in the input ({held}): nothing was ingested"


def forget_dataset(out: str | Path) -> None:
    """Remove a dataset directory this ingest created and wrote nothing into (its salt, empty folders)."""
    from .store import objstore
    from .store.files import SALT_FILE, TEXT_POLICY_FILE

    if objstore.is_remote(out):  # only the metadata objects: object storage has no folders to leave behind
        objstore.delete_quietly(objstore.parse(str(out)), (SALT_FILE, TEXT_POLICY_FILE))
        return
    out = Path(out)

    for name in (SALT_FILE, TEXT_POLICY_FILE):  # the policy claimed for a dataset that holds nothing
        with contextlib.suppress(OSError):
            (out / name).unlink(missing_ok=True)
    for d in sorted((p for p in out.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            d.rmdir()
    with contextlib.suppress(OSError):
        out.rmdir()
