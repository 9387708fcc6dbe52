"""How an ingest takes its input: the files a directory stands for, what kind of capture each file is (a
compressed one decompressed first), and flow files cut at record boundaries into contiguous shares of about equal
bytes, one per process (read by `ingest`)."""

from __future__ import annotations

import codecs
import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Generator
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import compressed, flowsync
from .capturefile import NotRegular, open_regular
from .compressed import MAGIC, compression_of
from .harfile import attachment_name, encoding_of

NOT_A_CAPTURE = "not a mitmproxy flow file or HAR"
PART_BYTES = 8 * 1024 * 1024  # below this much input, ingest stays in one process
CHUNK = 1 << 20  # bytes of a HAR read at a time when looking for the bodies it keeps as files


class IngestError(Exception):
    """A capture file that cannot be read to its end. Everything before `position` was kept."""

    def __init__(self, path: Path, position: str, reason: str) -> None:
        super().__init__(f"{path}: {position}: {reason}")
        self.path, self.position, self.reason = path, position, reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (IngestError, (self.path, self.position, self.reason))


@dataclass(frozen=True)
class Part:
    """A run of whole records of a flow file (or a whole HAR file): bytes [start, end), `before` flows ahead.
    A HAR too large for one process is read by `stripes` processes, stripe `stripe` taking entries i with
    i % stripes == stripe (a HAR cannot be cut at a byte offset: each reads the whole file, converting and
    extracting only its own entries)."""

    path: Path
    start: int = 0
    end: int | None = None
    before: int = 0
    har: bool = False
    attachments: Path | None = None  # a HAR's bodies kept as files: their folder or zip (None: the HAR's folder)
    stripe: int = 0
    stripes: int = 1

    def size(self) -> int:
        """Bytes of input this part stands for (a stripe: its share of the HAR)."""
        return ((self.end if self.end is not None else self.path.stat().st_size) - self.start) // self.stripes


EMPTY = "an empty file: nothing to ingest"
SPACE_BEFORE = 1 << 20  # bytes of whitespace before a HAR's `{` looked through to tell it is one


def kind(path: Path) -> str:
    """ "flows", "har", "empty" or the compression of a compressed file (`compressed.MAGIC`); IngestError when
    the file is none of these (or cannot be read, or is not a regular file: a FIFO or a device would block or
    never end)."""
    try:
        with open_regular(path) as f:
            head = f.read(64)
            text = _text(head)
            if len(head) == 64 and not text:
                head += f.read(SPACE_BEFORE)  # a HAR may start with whitespace: JSON allows any amount
                text = _text(head)
    except NotRegular as e:
        pipe = " (a pipe: save what it carries to a file and ingest that)" if e.what == "a FIFO" else ""
        raise IngestError(path, "byte 0", f"{e.what}, not a capture file{pipe}; {NOT_A_CAPTURE}") from e
    except OSError as e:
        if isinstance(e, FileNotFoundError) and (target := _dangling(path)) is not None:
            raise IngestError(path, "byte 0", f"a link to {target}, which does not exist") from e
        raise IngestError(path, "byte 0", f"cannot read it ({e.strerror or e})") from e
    if not head:
        return "empty"
    compression = compression_of(head)
    if compression is not None:
        return compression
    if text.startswith("{"):
        return "har"
    colon = head.find(b":")
    if 0 < colon <= 20 and head[:colon].isdigit():
        return "flows"
    if _damaged_flows(path):
        return "flows"
    raise IngestError(path, "byte 0", NOT_A_CAPTURE)


def _dangling(path: Path) -> str | None:
    """Where `path` leads, if it is a symbolic link (one whose target does not exist reads as no file at all)."""
    try:
        return os.readlink(path)
    except OSError:
        return None


def _text(head: bytes) -> str:
    return head.decode(encoding_of(head), "replace").lstrip("\ufeff \t\r\n")


def _damaged_flows(path: Path) -> bool:
    """A flow file whose first bytes are damaged: a whole record within its first MiB (the reader resumes there)."""
    try:
        with open_regular(path) as f:
            return flowsync.holds_a_record(f.read(SPACE_BEFORE))
    except OSError:
        return False


def split_flow_file(path: Path, part_bytes: int = PART_BYTES) -> list[Part]:
    """Cut a flow file at record boundaries into parts of about `part_bytes`, reading only the records'
    length prefixes. Where the prefixes stop making sense, the rest is one last part, whose reader reports
    the damage at its exact position."""
    size = path.stat().st_size
    parts: list[Part] = []
    start = offset = count = before = 0
    with open_regular(path) as f:
        while offset < size:
            f.seek(offset)
            head = f.read(21)
            colon = head.find(b":")
            if colon <= 0 or not head[:colon].isdigit():
                break
            offset += colon + 1 + int(head[:colon]) + 1
            count += 1
            if offset - start >= part_bytes and offset < size:
                parts.append(Part(path, start, offset, before))
                start, before = offset, count
    if start < size or not parts:
        parts.append(Part(path, start, None, before))
    return parts


def plan(
    paths: list[Path], kinds: dict[Path, str], jobs: int, part_bytes: int = PART_BYTES, head: int = 0
) -> list[list[Part]]:
    """The input as `jobs` (or fewer) contiguous shares of about equal bytes, one per process, the first `head`
    bytes larger than the others (its process reads from the start while the others start up). A HAR larger than
    one process's share (and than `part_bytes`) is striped: stripe k of it in share k, every share reading it."""
    sizes = {p: p.stat().st_size for p in paths}
    total = sum(sizes.values())
    if jobs <= 1 or total <= part_bytes:
        return [[Part(p, har=kinds[p] == "har") for p in paths]]
    share = -(-total // jobs)
    striped = [p for p in paths if kinds[p] == "har" and sizes[p] > max(share, part_bytes)]
    rest = total - sum(sizes[p] for p in striped)
    head = min(head, rest // jobs)
    first, other = (rest + head * (jobs - 1)) / jobs, (rest - head) / jobs
    pieces: list[Part] = []
    for p in paths:
        if p in striped:
            continue
        if kinds[p] == "har":
            pieces.append(Part(p, har=True))
        else:  # cut finely, so that each share ends near its due; contiguous cuts are joined again below
            pieces.extend(split_flow_file(p, min(part_bytes, max(1, int(other) // SHARE_CUTS))))
    groups: list[list[Part]] = [[] for _ in range(jobs)]
    at = 0
    for piece in pieces:  # each piece to the share its middle falls in: every share ends at the cut nearest its due
        size = piece.size()
        g = groups[min(jobs - 1, max(0, math.floor((at + size / 2 - first) / other) + 1))]
        at += size
        if g and not (piece.har or g[-1].har) and g[-1].path == piece.path and g[-1].end == piece.start:
            g[-1] = replace(g[-1], end=piece.end)  # one part, read as a single process reads the file
        else:
            g.append(piece)
    if striped:
        for k, group in enumerate(groups):
            group.extend(Part(p, har=True, stripe=k, stripes=jobs) for p in striped)
    return [g for g in groups if g]


SHARE_CUTS = 64  # pieces of a share's worth of input among which the plan chooses where shares end


ROUND_COPIES = 4 << 30  # bytes of decompressed copies a round gathers before it is read (and they are removed)


@dataclass
class Inputs:
    """One round of the input: the files to read (decompressed copies in place of compressed captures) and their
    kinds; the files of no bytes; what could not be read; each decompressed copy's compressed original; the bytes
    of the files to read as given (a compressed capture at its compressed size); whether it is the last round."""

    read: list[Path] = field(default_factory=list)
    kinds: dict[Path, str] = field(default_factory=dict)
    empty: list[Path] = field(default_factory=list)
    errors: list[IngestError] = field(default_factory=list)
    shown: dict[Path, Path] = field(default_factory=dict)
    given: int = 0
    unpacked: int = 0  # bytes (as given) of the compressed captures this round decompressed, read or not
    attachments: dict[Path, Path] = field(default_factory=dict)  # decompressed HAR -> where its `_file` bodies are
    last: bool = True


class _NoRoom(Exception):
    """The disk cannot hold this copy beside the round's earlier ones: read those first, then try again."""


class _Scratch:
    """A temporary folder, made at the first call (never, without one), removed with `cleanup`."""

    def __init__(self, cleanup: ExitStack) -> None:
        self.cleanup = cleanup
        self.path: Path | None = None

    def __call__(self) -> Path:
        if self.path is None:
            self.path = Path(self.cleanup.enter_context(tempfile.TemporaryDirectory(prefix="converse-tap-ingest-")))
        return self.path


def size_as_given(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


Unpacking = Callable[[int], None]  # told the bytes (as given) of a round's compressed captures decompressed so far


def rounds(paths: list[Path], copies: int | None = None, unpacking: Unpacking | None = None) -> Generator[Inputs]:
    """The input in rounds, in order, each to be read before the next is made. Plain captures are read where they
    are; a compressed one is decompressed into a temporary folder, and a round ends once its copies reach `copies`
    bytes, or when the disk cannot hold the next copy beside them (that capture starts the next round): a round's
    copies are removed when the consumer asks for the next round (or closes the generator), so a year of compressed
    captures needs room for a round, never for the year. `unpacking`, if given, follows each round's decompression."""
    copies = ROUND_COPIES if copies is None else copies
    pending = list(paths)
    while pending:
        with ExitStack() as cleanup:
            tmp, found, copied = _Scratch(cleanup), Inputs(), 0
            while pending and copied < copies:
                try:
                    copied += _take(pending[0], found, tmp, copied == 0, unpacking)
                except _NoRoom:
                    break
                pending.pop(0)
            found.last = not pending
            yield found


def _take(p: Path, found: Inputs, tmp: Callable[[], Path], alone: bool, unpacking: Unpacking | None) -> int:
    """Add `p` to the round `found` (decompressed into `tmp()` if compressed); the bytes of its copy."""
    given, copy, packed = p, 0, ""
    try:
        what = kind(p)
        if what in MAGIC.values():
            packed = what
            try:
                folder = tmp()
            except OSError as e:
                raise IngestError(
                    p, "byte 0", f"no temporary folder to decompress it in ({e}): set TMPDIR to a writable one"
                ) from None
            before = found.unpacked
            read = (lambda n: unpacking(before + n)) if unpacking is not None else None
            try:
                what, p, stopped = decompressed(p, what, folder, found.shown, alone, read)
            except IngestError:
                found.unpacked = before + size_as_given(given)
                raise
            found.unpacked = before + size_as_given(given)  # (not for _NoRoom: it is read in the next round)
            copy = size_as_given(p)
            if stopped is not None:
                found.errors.append(stopped)
    except IngestError as e:
        found.errors.append(e)
        return 0
    if what == "empty":
        found.empty.append(found.shown.get(p, p))
    elif what:
        found.read.append(p)
        found.kinds[p] = what
        found.given += size_as_given(given)
        if p != given:  # a copy: its bodies kept as files are in the zip it came in, or beside the compressed file
            found.attachments[p] = given if packed == "zip" else given.parent
    return copy


def decompressed(
    path: Path,
    compression: str,
    tmp: Path,
    shown: dict[Path, Path],
    alone: bool = True,
    read: Callable[[int], None] | None = None,
) -> tuple[str, Path, IngestError | None]:
    """The kind and the decompressed copy (in `tmp`) of a compressed capture ("" when nothing of it can be read),
    and what stopped its decompression, if anything: whatever came before it is read. `shown` maps the copy back to
    `path`. IngestError when the copy is not a capture either; _NoRoom when the disk's reserve stopped it and it is
    not `alone` in its round (the partial copy is removed)."""
    stopped = None
    try:
        plain = compressed.decompress(path, compression, tmp, read)
    except compressed.NotDecompressed as e:
        if e.room and not alone:
            if e.partial is not None:
                e.partial.unlink(missing_ok=True)
            raise _NoRoom from None
        stopped = IngestError(path, f"byte {e.written} of the decompressed capture", e.reason)
        if not e.written or e.partial is None:
            return "", path, stopped
        plain = e.partial
    shown[plain] = path
    try:
        found = kind(plain)
    except IngestError as e:
        raise as_given(e, shown) from None
    if found in MAGIC.values():
        raise IngestError(path, "byte 0 of the decompressed capture", f"compressed twice ({compression}, then {found})")
    return found, plain, stopped


def as_given(e: IngestError, shown: dict[Path, Path]) -> IngestError:
    """`e` naming the compressed file as given rather than its decompressed copy."""
    given = shown.get(e.path)
    return e if given is None else IngestError(given, f"{e.position} of the decompressed capture", e.reason)


def capture_files(args: list[Path], skip: Path | None = None) -> tuple[list[Path], list[IngestError]]:
    """The files to ingest: each argument, a directory standing for every file under it (sorted by path; hidden
    files and folders, links to folders and the folder `skip` — the dataset being written — left out), and the
    folders that could not be listed (named, never passed over in silence)."""
    files: list[Path] = []
    errors: list[IngestError] = []
    skipped = skip.resolve() if skip is not None else None

    def unlisted(e: OSError) -> None:
        errors.append(IngestError(Path(e.filename or "?"), "directory", f"cannot list it ({e.strerror or e})"))

    for arg in args:
        if not arg.is_dir():
            files.append(arg)
            continue
        if skipped is not None and (arg.resolve() == skipped or skipped in arg.resolve().parents):
            continue  # the dataset itself (or a folder of it) named as input: its files are no captures
        for root, dirs, names in os.walk(arg, onerror=unlisted):  # links to folders are not followed
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and (Path(root) / d).resolve() != skipped)
            files.extend(Path(root) / n for n in sorted(names) if not n.startswith("."))
    return without_attachments(files), errors


_HAR_NAME = re.compile(r"\.har(?:\.(?:gz|bz2|xz|zst|zstd))?$", re.IGNORECASE)
_FILE_KEY = re.compile(r'"_file"\s*:\s*("(?:[^"\\]|\\.){1,1024}")')
_OVERLAP = 2100  # characters a `"_file": "NAME"` pair may span (a name of up to 1024 characters, escaped)


def without_attachments(files: list[Path]) -> list[Path]:
    """`files` less the bodies a HAR among them keeps as files beside it (`"_file": NAME`, as Playwright writes
    them with content "attach": `<sha1>.json`, `<sha1>.html`...): they are read with their HAR, not as captures of
    their own, which a JSON body would seem to be. Only a folder holding a HAR and other files is looked into."""
    folders: dict[Path, list[Path]] = {}
    for f in files:
        folders.setdefault(f.parent, []).append(f)
    dropped: set[Path] = set()
    for members in folders.values():
        hars = [f for f in members if _HAR_NAME.search(f.name)]
        if hars and len(hars) < len(members):
            names = {n for h in hars for n in attachment_names(h)}
            dropped.update(f for f in members if f.name in names and f not in hars)
    return [f for f in files if f not in dropped] if dropped else files


def attachment_names(har: Path) -> set[str]:
    """The names a HAR gives its bodies kept as files (`"_file": NAME`), found by a scan of its text (decompressed
    first if it is compressed); names that are paths are left out (never read: see `harentry.Attachments`). A file
    that cannot be read has none here: ingest reports it when it reads it."""
    found: set[str] = set()
    try:
        with open_regular(har) as raw:
            compression = compression_of(raw.read(8))
            raw.seek(0)
            if compression == "zip":
                return found  # (a `.har.zip` holds its bodies itself)
            src = compressed.opened(compression, raw) if compression else raw
            try:
                text, decoder = "", None
                while chunk := src.read(CHUNK):
                    if decoder is None:
                        decoder = codecs.getincrementaldecoder(encoding_of(chunk))("replace")
                    text = text[-_OVERLAP:] + decoder.decode(chunk)
                    for m in _FILE_KEY.finditer(text):
                        try:
                            name = json.loads(m.group(1))
                        except ValueError:
                            continue
                        if attachment_name(name):
                            found.add(name)
            finally:
                src.close()
    except Exception:  # damaged, unreadable, not a HAR: reported when ingest reads it (the names found stand)
        return found
    return found
