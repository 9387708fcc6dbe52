"""Commands that put traffic into a dataset: record, ingest, recover, addon-path."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..a2a.redact import TEXT_POLICIES, TextPolicy
from ..textsafe import safe_line
from .guards import (
    DATASET,
    Dataset,
    DatasetLocation,
    UsageError,
    check_dataset,
)

if TYPE_CHECKING:  # the analysis imports pandas: only the commands that need it load it
    pass
from .base import cli


@cli.command("addon-path")
def addon_path() -> None:
    """Print the path of the addon script for `mitmdump -s` / `mitmweb -s`.

    \b
    Example:
        mitmdump -s "$(converse-tap addon-path)" --set converse_tap_dir=data/
    """
    from ..addon import mitmdump_script

    click.echo(Path(mitmdump_script.__file__).resolve())


@cli.command()
@click.option(
    "--out", "out", default="converse-tap-data", show_default=True, help="Dataset directory, or s3://BUCKET/PREFIX."
)
@click.option(
    "--journal-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="For an s3:// dataset: the local directory of its journals "
    "(default: a folder named for the dataset under ~/.cache/converse-tap/journals).",
)
@click.option("--listen-host", default="127.0.0.1", show_default=True, help="Address the proxy listens on.")
@click.option("--listen-port", default=8080, show_default=True, type=int, help="Port (0 picks a free one).")
@click.option(
    "--mode",
    "modes",
    multiple=True,
    help="mitmproxy mode, e.g. regular (default) or reverse:http://127.0.0.1:9999 in front of one agent.",
)
@click.option(
    "--text", type=click.Choice(TEXT_POLICIES), default="keep", show_default=True, help="Message text policy."
)
@click.option("--flush-interval", type=float, default=1.0, show_default=True, help="Seconds between journal flushes.")
@click.option(
    "--otlp-endpoint",
    metavar="URL",
    help="Send a span per A2A exchange to this OTLP/HTTP collector (e.g. http://127.0.0.1:4318); otel extra.",
)
@click.option("--otlp-text", is_flag=True, help="Put message text into spans (only with --text keep).")
@click.option(
    "--metrics-listen", metavar="HOST:PORT", help="Serve Prometheus metrics at /metrics there (e.g. 127.0.0.1:9464)."
)
@click.option(
    "--redact",
    "redact",
    multiple=True,
    metavar="REGEX",
    help="Also redact what this regular expression matches in every stored URL, card URL and error text (its groups "
    "only, if it has any); repeatable. Credentials in userinfo, JWTs, ;jsessionid= and secret query values are "
    "always redacted.",
)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Any mitmproxy option (repeatable).")
def record(
    out: str,
    listen_host: str,
    listen_port: int,
    modes: tuple[str, ...],
    text: str,
    flush_interval: float,
    otlp_endpoint: str | None,
    otlp_text: bool,
    metrics_listen: str | None,
    redact: tuple[str, ...],
    sets: tuple[str, ...],
    journal_dir: Path | None,
) -> None:
    """Run a recording proxy: A2A traffic through it lands in a Parquet dataset.

    \b
    Example:
        converse-tap record --out data/ --listen-port 8080
        HTTPS_PROXY=http://127.0.0.1:8080 my-a2a-client ...
    Stop with Ctrl-C; everything recorded is flushed to Parquet.
    """
    _standard_fds_open()
    from mitmproxy import exceptions

    from ..a2a.redact import Redaction
    from ..record import ListenError
    from ..store.files import TextPolicyConflict, check_writable, dataset_text_policy

    try:
        Redaction.from_patterns(redact)
    except ValueError as e:
        raise UsageError(f"--redact: {e}") from e
    for item in sets:
        key, eq, _ = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--set takes KEY=VALUE, not {item!r} (e.g. --set ssl_insecure=true)")
    from ..store import objstore

    try:
        root = objstore.location(out)
    except ValueError as e:
        raise UsageError(f"--out: {e}") from e
    created = isinstance(root, Path) and not root.exists()
    if objstore.is_remote(root):  # the journals stay on local disk: checked first, without the network
        try:
            check_writable(objstore.journal_root(root, journal_dir))
        except (OSError, RuntimeError) as e:  # RuntimeError: no home directory (HOME unset, no passwd entry)
            where = "--journal-dir" if journal_dir is not None else "the default journal folder (under ~/.cache)"
            raise UsageError(
                f"cannot keep the journals of --out {out} in {where}: {e}; give --journal-dir DIR, a local "
                "directory this user can write"
            ) from e
    try:
        check_writable(root)
        recorded = dataset_text_policy(root)
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot write the dataset to --out {out}: {e}") from e
    if recorded is not None and recorded != text:
        raise UsageError(str(TextPolicyConflict(root, recorded, text)))
    settings = {
        "converse_tap_dir": out,
        "converse_tap_text": text,
        "converse_tap_flush_interval": str(flush_interval),
        "listen_host": listen_host,
        "listen_port": listen_port,
        "converse_tap_otlp_endpoint": otlp_endpoint or "",
        "converse_tap_otlp_text": otlp_text,
        "converse_tap_metrics_listen": metrics_listen or "",
        "converse_tap_journal_dir": str(journal_dir or ""),
    }
    if redact:
        settings["converse_tap_redact"] = list(redact)
    if modes:
        settings["mode"] = list(modes)
    try:
        _run_recorder(settings, sets, root if isinstance(root, Path) and created else None)
    except TextPolicyConflict as e:
        raise UsageError(str(e)) from e
    except ListenError as e:
        hint = "choose another --listen-port (0 picks a free one)" if e.in_use else "check --listen-host, --listen-port"
        raise UsageError(f"the proxy cannot listen: {e.reason}; {hint}") from e
    except exceptions.OptionsError as e:
        message = str(e)
        if message.startswith("unknown option"):
            message += " (--set takes mitmproxy's options, listed by `mitmdump --options`, and converse_tap_*)"
        elif message.startswith("Invalid proxy mode"):
            message += (
                "; give one of mitmproxy's modes, e.g. --mode regular (the default), reverse:http://HOST:PORT,"
                " upstream:http://HOST:PORT, transparent, socks5"
            )
        raise UsageError(message) from e


def _run_recorder(settings: dict[str, Any], sets: tuple[str, ...], created: Path | None) -> None:
    """Run the proxy; a start-up that fails leaves no empty dataset directory this command made."""
    from ..record import run_proxy

    try:
        asyncio.run(run_proxy(settings, list(sets), _log_streams()))
    except Exception:
        if created is not None:
            with contextlib.suppress(OSError):
                created.rmdir()  # only when empty: nothing was recorded
        raise


def _standard_fds_open() -> None:
    """Descriptors 0, 1 and 2 open, on /dev/null when the recorder was started with them closed (a daemon's
    `<&- >&- 2>&-`): else the first sockets the proxy opens take those numbers (its listening socket or a client's
    connection became descriptor 2, where anything written to stderr below Python would have gone), and so do the
    recording worker's journals, which it inherits closed."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def _log_streams() -> tuple[Any, ...] | None:
    """Where the proxy's log lines go: None for stdout, as mitmdump prints them (then stderr, if stdout's reader
    goes away). A recorder started as a daemon with stdout closed (`converse-tap record ... >&- &`, `setsid`) logs
    to stderr, or nowhere when that is closed too: mitmproxy's log handler exits the process on the first line it
    cannot print, so such a recorder died at start-up with exit 1, recording nothing."""
    from .base import _ClosedOutput

    if sys.stdout is not None and not isinstance(getattr(sys.stdout, "buffer", None), _ClosedOutput):
        return None
    return (sys.stderr,)


WHAT_INGEST_READS = (
    "ingest reads mitmproxy flow files (`mitmdump -w FILE`, or mitmweb's File > Save) and HAR files (a browser's, "
    "Playwright's, Charles' or Fiddler's HAR export), plain or compressed (gzip, bzip2, xz, zstd, a .har.zip): "
    "export the capture in one of these and ingest that"
)


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    "out",
    required=True,
    type=DatasetLocation(exists=False),
    help="Dataset directory, or s3://BUCKET/PREFIX.",
)
@click.option(
    "--journal-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="For an s3:// dataset: the local directory of its journals "
    "(default: a folder named for the dataset under ~/.cache/converse-tap/journals).",
)
@click.option(
    "--text", type=click.Choice(TEXT_POLICIES), default="keep", show_default=True, help="Message text policy."
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    help="Processes sharing the input (above 8 MiB of it); default: one per CPU core.",
)
@click.option(
    "--redact",
    "redact",
    multiple=True,
    metavar="REGEX",
    help="Also redact what this regular expression matches in every stored URL (its groups only, if it has any); "
    "repeatable. Credentials in userinfo, JWTs, ;jsessionid= and secret query values are always redacted.",
)
def ingest(
    files: tuple[Path, ...],
    out: Dataset,
    journal_dir: Path | None,
    text: str,
    jobs: int | None,
    redact: tuple[str, ...],
) -> None:
    """Import mitmproxy flow files (mitmdump -w) and HAR files into a dataset, plain or compressed.

    \b
    Example:
        converse-tap ingest capture.mitm browser.har --out data/
    An unreadable record, entry or damaged stretch is named with its file and position and costs only itself;
    the rest is kept (exit 1). Exchanges already in the dataset are skipped. A progress bar shows on a terminal.
    A capture compressed with gzip, bzip2, xz or zstd is decompressed into a temporary file ($TMPDIR) first,
    a few at a time (up to 4 GiB of copies, or what the disk holds), each removed once read; so is a
    Playwright .har.zip, whose bodies kept as files are read from the zip.
    A directory stands for every file under it (hidden ones, links to folders and the dataset itself left out);
    the bodies a HAR beside them keeps as files (Playwright's "attach") are read with it, not as captures.
    Flows that are not HTTP (tcp, udp, dns) and WebSocket messages are not read: the summary counts them by kind.
    """
    from ..a2a.redact import Redaction
    from ..ingest import EMPTY, NOT_A_CAPTURE, IngestError, kind
    from ..ingest import ingest as run_ingest
    from ..ingest_plan import capture_files
    from ..ingest_report import forget_dataset, nothing_read, report_lines
    from ..nopandas import without_pandas
    from ..progress import ProgressBar
    from ..store import objstore
    from ..store.files import TextPolicyConflict, check_writable, claim_text_policy, dataset_salt, is_dataset

    try:
        redaction = Redaction.from_patterns(redact)
    except ValueError as e:
        raise UsageError(f"--redact: {e}") from e
    # a directory stands for the files under it; one that cannot be listed is named, and fails the ingest
    found, unlisted = capture_files(list(files), None if objstore.is_remote(out) else Path(out))
    if not found and not unlisted:
        raise UsageError(
            f"no file under {', '.join(map(str, files))}: nothing to ingest (hidden files, links to folders and "
            "the dataset being written are left out)"
        )
    unreadable: list[IngestError] = []
    for path in found:
        try:
            if kind(path) == "empty":
                unreadable.append(IngestError(path, "byte 0", EMPTY))
        except IngestError as e:
            unreadable.append(e)
    for err in unlisted if len(unreadable) < len(found) else unlisted + unreadable:
        click.echo(safe_line(redaction.log_text(f"Error: {err}")), err=True)
    if len(unreadable) == len(found):  # nothing to read: nothing is created
        if any(e.reason.endswith(NOT_A_CAPTURE) for e in unreadable):
            click.echo(WHAT_INGEST_READS, err=True)
        sys.exit(2)
    try:
        existed = is_dataset(out) if objstore.is_remote(out) else Path(out).exists()
        check_writable(out)
        if objstore.is_remote(out):  # the journals stay on local disk
            check_writable(objstore.journal_root(out, journal_dir))
        claim_text_policy(out, text)
        policy = TextPolicy(text, dataset_salt(out) if text == "hash" else b"")
    except TextPolicyConflict as e:
        raise UsageError(str(e)) from e
    except OSError as e:
        raise UsageError(f"cannot write the dataset to --out {out}: {e}") from e
    bar = ProgressBar.on_terminal(sys.stderr)
    try:
        with without_pandas():
            result = run_ingest(
                found,
                out,
                policy,
                progress=bar,
                jobs=jobs or min(os.cpu_count() or 1, 8),
                redaction=redaction,
                journal_dir=journal_dir,
            )
    finally:
        if bar is not None:
            bar.close()
    if not existed and result.exchanges == 0 and not result.write_error:
        forget_dataset(out)  # nothing was read into it: leave nothing behind (its metadata)
    for level, line in report_lines(result, out):
        prefix = "Error: " if level == "error" else "Warning: " if level == "warning" else ""
        click.echo(safe_line(redaction.log_text(prefix + line)), err=True)
    if result.errors and all(e.reason.endswith(NOT_A_CAPTURE) for e in result.errors) and result.flows == 0:
        click.echo(WHAT_INGEST_READS, err=True)
        sys.exit(2)
    if result.flows == 0 and not (result.errors or result.write_error or result.interrupted):
        click.echo(f"Error: {nothing_read(result)}", err=True)  # never "success" on nothing but unread records
        sys.exit(2)
    if result.errors or result.write_error or result.interrupted or unlisted:
        sys.exit(1)


@cli.command()
@click.argument("dataset", type=DATASET)
@click.option(
    "--journal-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="For an s3:// dataset: the local directory of its journals "
    "(default: a folder named for the dataset under ~/.cache/converse-tap/journals).",
)
def recover(dataset: Dataset, journal_dir: Path | None) -> None:
    """Roll journals left by a proxy that died into Parquet files (for an s3:// dataset: upload them).

    The proxy does this itself when it starts again; this command is for datasets you only read. Exit 1 when
    some journals could not be uploaded: they are kept, run it again once the storage is reachable.
    """
    from ..store import objstore
    from ..store.recovery import recover as run_recover

    if not objstore.is_remote(dataset):  # (an s3:// dataset's journals are local: its bucket may be down)
        check_dataset(dataset)  # a directory no writer wrote into: "0 rows recovered" would read as success
    errors: list[str] = []
    counts = run_recover(dataset, journal_dir, errors)
    click.echo(", ".join(f"{n} {table} rows" for table, n in counts.items()) + " recovered", err=True)
    if errors:
        for error in errors:
            click.echo(safe_line(f"Error: not recovered: {error}"), err=True)
        click.echo(
            "Error: the journals are kept; run `converse-tap recover` again once the storage is reachable", err=True
        )
        sys.exit(1)
