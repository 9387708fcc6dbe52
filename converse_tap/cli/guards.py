"""The CLI's guards: usage and data errors worded in the CLI's own options, before and after the work."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..store.filekind import file_kind
from ..textsafe import safe_line, safe_text

if TYPE_CHECKING:
    from ..analysis.load import Window


class SafeError(click.ClickException):
    """An error whose message may quote the dataset (agent names, file names, conversation ids): shown with every
    control character, bidi override and invisible character as a visible escape, whatever the message holds.
    Backslashes are left as they are: the values a message quotes are escaped by `safe_line` where it is built
    (which doubles theirs, and keeps one value on one line), and are not escaped twice. Exit 1."""

    def format_message(self) -> str:
        return safe_text(self.message, backslash=False)


class UsageError(SafeError):
    """A usage or data error: exit 2, like click's own usage errors."""

    exit_code = 2


Dataset = Path | str  # a dataset directory, or the text s3://BUCKET/PREFIX


class DatasetLocation(click.ParamType):
    """A dataset: an existing directory, or `s3://BUCKET/PREFIX` (object storage, configured the AWS way)."""

    name = "DIR|s3://BUCKET/PREFIX"

    def __init__(self, exists: bool = True) -> None:
        self.exists = exists

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Dataset:
        from ..store import objstore

        if objstore.is_remote(value):
            try:
                objstore.parse(value)
            except ValueError as e:
                self.fail(str(e), param, ctx)
            return str(value)
        path: Path = click.Path(exists=self.exists, file_okay=False, path_type=Path).convert(value, param, ctx)
        # click refuses only regular files: a device (/dev/null), a FIFO or a socket is no directory either
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            return path  # a dataset that does not exist yet (exists=False)
        except OSError as e:
            self.fail(f"cannot use {path}: {e.strerror or e}", param, ctx)
        if not stat.S_ISDIR(mode):
            self.fail(f"{path} is {file_kind(mode)}, not a directory: give a dataset directory", param, ctx)
        return path


DATASET = DatasetLocation()


def check_source(dataset: Dataset, window: Window, memory_limit: str | None = None) -> None:
    """Exit 2 when `dataset` is not a dataset, or when --agent names an agent the dataset never saw."""
    import duckdb

    from ..analysis.agents import dataset_agents

    check_dataset(dataset)
    if not window.agents:
        return
    try:
        seen = dataset_agents(dataset, memory_limit)
    except (OSError, ValueError, duckdb.Error) as e:
        raise read_error(e, dataset, SafeError) from e
    unknown = [a for a in window.agents if a not in seen]
    if unknown:
        names = ", ".join(f"'{safe_line(a)}'" for a in unknown)
        none = "  (none: it holds no traffic and no agent cards)"
        listed = "\n".join(f"  {safe_line(a)}" for a in seen) if seen else none
        raise UsageError(f"--agent {names}: the dataset {dataset} never saw this agent. The agents it saw:\n{listed}")


def check_dataset(dataset: Dataset) -> None:
    """Exit 2 when `dataset` holds nothing a converse-tap writer makes."""
    from ..store.files import is_dataset

    try:
        found = is_dataset(dataset)
    except FileNotFoundError as e:
        raise UsageError(f"{dataset} is not a converse-tap dataset: {e}") from e
    except OSError as e:  # object storage that cannot be reached, a bucket that does not exist, no access
        raise SafeError(
            f"cannot read the dataset {dataset}: {first_line(e)} (check AWS_ENDPOINT_URL and the credentials)"
        ) from e
    if not found:
        raise UsageError(
            f"{dataset} is not a converse-tap dataset (no exchanges/, messages/, agent_cards/ or _journal/ in it): "
            "give the --out directory of `converse-tap record` or `converse-tap ingest`"
        )


def first_line(e: BaseException) -> str:
    """An error's first line: DuckDB goes on with advice in its own terms (SET statements, PRAGMAs). An error
    DuckDB passes on from the Python filesystem it read S3 through starts with that error's traceback: its own
    line (`OSError: …`, the first one not indented after `Traceback`) is the one that says what went wrong."""
    java = getattr(e, "java_exception", None)  # py4j's Py4JJavaError, from Spark: "An error occurred while calling
    if java is not None:  # o75.parquet." says nothing; the Java exception's own first line says what went wrong
        try:
            java_lines = str(java.toString()).strip().splitlines()
        except Exception:  # (the JVM may be gone by now)
            java_lines = []
        if java_lines:
            return java_lines[0]
    lines = str(e).strip().splitlines()
    if not lines:
        return type(e).__name__
    if lines[0].startswith("Traceback (most recent call last)"):
        said = next((line for line in lines[1:] if line.strip() and not line.startswith((" ", "\t"))), None)
        if said is not None:
            return said
    return lines[0]


def read_error(e: Exception, dataset: Dataset, error: type[click.ClickException]) -> click.ClickException:
    """What a user reads when the analysis fails: in this CLI's options, never DuckDB's tuning advice."""
    from ..store.changes import ReadInterrupted

    if isinstance(e, ReadInterrupted):  # the dataset changed, or its storage failed, while it was read
        return UsageError(str(e))
    advice = out_of_memory(e, "the analysis")
    if advice is not None:
        return error(advice)
    return error(f"cannot read the dataset {dataset}: {first_line(e)}")


def out_of_memory(e: BaseException, what: str) -> str | None:
    """What to do when the engine ran out of memory, in this CLI's options (DuckDB's own advice is `SET` statements,
    which `sql` refuses): the one wording `report`, `check`, `agents`, `sql` and `show` give. None for another error.
    DuckDB raises some out-of-memory errors as the plain `duckdb.Error` (as rows stream out): known by their line."""
    import duckdb

    line = first_line(e)
    if isinstance(e, duckdb.OutOfMemoryException) or line.startswith("Out of Memory Error"):
        return f"{what} needs more memory than its limit allows; raise --memory-limit ({line})"
    return None


NOTHING_MEASURED = 3  # `report`'s exit status when the report rests on no A2A message


def output_option(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """-o as a path: a name that ends in a slash (`-o out/`, a directory not made yet) or is empty is refused, not
    written as a file named `out` (or `.`). `-o -` is stdout, as for most commands (it wrote a file named `-`)."""
    if value is None or value == "-":
        return None
    if not value.strip():
        raise click.BadParameter("give a file name, e.g. -o report.html")
    if value.endswith(("/", os.sep)):
        raise click.BadParameter(f"{safe_line(value)} names a directory; give a file in it, e.g. {value}report.html")
    return Path(value)


def check_output(output: Path, dataset: Dataset | None = None) -> None:
    """Exit 2, before the work, when -o cannot be written: a parent of it is a file (click itself refuses a
    directory), or the file, or the nearest directory of it that exists, is not writable (a read-only file system,
    a directory of another user): found after a long report, it cost the report. Or when -o is one of `dataset`'s
    own files or inside its tables or journals (`-o data/messages/…/part-….parquet`, a slip of tab completion,
    overwrote that file with the report: the dataset lost its messages)."""
    if dataset is not None and not isinstance(dataset, str):
        from ..store.files import JOURNAL_DIR, SALT_FILE, TABLES, TEXT_POLICY_FILE

        own = {*TABLES, JOURNAL_DIR, SALT_FILE, TEXT_POLICY_FILE}
        inside = Path(os.path.realpath(output)).relative_to(os.path.realpath(dataset), walk_up=True).parts
        if inside and inside[0] in own:
            raise UsageError(
                f"-o {output} would overwrite or add to the dataset's own files ({inside[0]}); write the report "
                f"elsewhere, e.g. -o {Path(dataset) / 'report.html'}"
            )
    if output.is_file() and not os.access(output, os.W_OK):
        raise UsageError(f"-o {output}: the file is not writable; give another file, or make it writable")
    for parent in output.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"-o {output}: {parent} is a file, not a directory")
            if not output.exists() and not os.access(parent, os.W_OK | os.X_OK):
                raise UsageError(f"-o {output}: cannot write in {parent}; give a file in a directory you can write to")
            break


def write_output(output: Path, text: str) -> None:
    """Write a report to -o, making its missing directories. A file is written owner-only; what is not a file
    (`/dev/null`, `/dev/stdout`, a FIFO, `>(gzip > r.gz)`) is written to as it is, its permissions untouched
    (`write_private`): run as root, `-o /dev/null` made /dev/null owner-only, and every other user's programs failed
    on it."""
    try:
        from ..store.files import make_dir, write_private

        make_dir(output.parent)  # owner-only, as the dataset: a report may quote message text
        write_private(output, text)
    except OSError as e:
        raise UsageError(f"cannot write -o {output}: {e.strerror or e}; give another file") from e


@contextlib.contextmanager
def needs_extra(extra: str, command: str) -> Iterator[None]:
    """Imports a command needs from an optional extra: a missing package is a usage error naming the install."""
    try:
        yield
    except ModuleNotFoundError as e:
        if e.name is None or e.name.split(".")[0] == "converse_tap":
            raise  # our own module missing is a bug, not a missing extra
        raise UsageError(
            f"`{command}` needs the {extra} extra ({e.name.split('.')[0]} is not installed): "
            f"pip install 'a2a-converse-tap[{extra}]'"
        ) from e


MIN_OPTIONS = {  # the option that sets each metric's minimum basis
    "unanswered_share": "--min-turns",
    "answered_share": "--min-turns",
    "abandonment_rate": "--min-routines",
    "human_share": "--min-replies",
}
