"""Compressed captures (`.gz`, `.bz2`, `.xz`, `.zst`) are ingested as their plain selves: the same rows, split among
processes alike; damage and a decompression bomb cost only what follows them, and are named with the file as given."""

from __future__ import annotations

import bz2
import gzip
import lzma
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from converse_tap import compressed, ingest_plan
from converse_tap import ingest as ingest_module
from converse_tap.a2a.redact import TextPolicy
from converse_tap.cli import cli
from converse_tap.ingest import IngestResult, ingest
from converse_tap.store.reader import load
from tests.test_ingest import _entry, _har

try:
    from compression import zstd  # type: ignore[import-not-found,unused-ignore]
except ImportError:
    from backports import zstd  # type: ignore[no-redef,unused-ignore]

COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "zst": zstd.compress}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.captures import write_capture

    return write_capture(tmp_path_factory.mktemp("plain") / "capture.mitm", 600)


def _rows(root: Path) -> tuple[list[str], list[tuple[str, int]]]:
    ex = load(root, "exchanges")
    msgs = load(root, "messages")
    return sorted(ex["exchange_id"]), sorted(zip(msgs["exchange_id"], msgs["seq"], strict=True))


@pytest.fixture(scope="module")
def reference(plain: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[tuple[str, int]]]:
    out = tmp_path_factory.mktemp("reference") / "out"
    result = ingest([plain], out, TextPolicy())
    assert not result.errors and result.exchanges > 500
    return _rows(out)


@pytest.mark.parametrize("suffix", sorted(COMPRESS))
def test_a_compressed_flow_file_gives_the_rows_of_the_plain_one(
    plain: Path,
    reference: tuple[list[str], list[tuple[str, int]]],
    tmp_path: Path,
    suffix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where the decompressed copy goes
    packed = tmp_path / f"capture.mitm.{suffix}"
    packed.write_bytes(COMPRESS[suffix](plain.read_bytes()))
    result = ingest([packed], tmp_path / "out", TextPolicy(), jobs=2, part_bytes=256 * 1024)
    assert not result.errors, result.errors
    assert _rows(tmp_path / "out") == reference
    assert list((tmp_path / "tmp").iterdir()) == []  # the decompressed copy is gone


def test_a_compressed_har_and_the_cli(tmp_path: Path) -> None:
    _har(tmp_path / "b.har", [_entry("one"), _entry("two")])
    packed = tmp_path / "b.har.gz"
    packed.write_bytes(gzip.compress((tmp_path / "b.har").read_bytes()))
    r = CliRunner().invoke(cli, ["ingest", str(packed), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert len(load(tmp_path / "out", "exchanges")) == 2


def test_a_damaged_compressed_file_keeps_what_came_before_the_damage(plain: Path, tmp_path: Path) -> None:
    data = gzip.compress(plain.read_bytes())
    cut = tmp_path / "cut.mitm.gz"
    cut.write_bytes(data[: len(data) // 2])
    result = ingest([cut], tmp_path / "out", TextPolicy())
    assert 100 < result.exchanges < 500
    assert result.errors and all(e.path == cut for e in result.errors)
    assert "of the decompressed capture" in result.errors[0].position
    assert "gzip data is damaged" in result.errors[0].reason

    garbage = tmp_path / "garbage.gz"
    garbage.write_bytes(b"\x1f\x8b" + b"\x00" * 100)
    r = CliRunner().invoke(cli, ["ingest", str(garbage), "--out", str(tmp_path / "out2")])
    assert r.exit_code == 1 and "garbage.gz: byte 0 of the decompressed capture" in r.stderr, r.output
    assert "Traceback" not in r.output


def test_a_decompression_bomb_stops_before_the_disk_fills(
    plain: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the disk can take is measured as decompression goes; here, as if 2 MiB were left."""
    monkeypatch.setattr(compressed, "_room", lambda folder: 2 << 20)
    bomb = tmp_path / "bomb.mitm.xz"
    bomb.write_bytes(lzma.compress(plain.read_bytes() + b"0" * (64 << 20)))  # 64 MiB of zeros after the flows
    assert bomb.stat().st_size < 1 << 20
    result = ingest([bomb], tmp_path / "out", TextPolicy())
    assert result.exchanges > 100  # the flows within the first 2 MiB
    assert any("would leave less than" in e.reason and "set TMPDIR" in e.reason for e in result.errors)


def test_compressed_twice_or_empty(tmp_path: Path) -> None:
    twice = tmp_path / "twice.gz"
    twice.write_bytes(gzip.compress(gzip.compress(b"1:x,")))
    empty = tmp_path / "empty.gz"
    empty.write_bytes(gzip.compress(b""))
    result = ingest([twice, empty], tmp_path / "out", TextPolicy())
    assert [e.reason for e in result.errors] == ["compressed twice (gzip, then gzip)"]
    assert result.empty == [empty]


def test_a_directory_stands_for_the_captures_under_it(plain: Path, tmp_path: Path) -> None:
    """A year of captures is a folder of them: every file under it is read (sorted; hidden files, links to folders
    and the dataset being written left out), and a file that is not a capture is named, the rest ingested."""
    archive = tmp_path / "archive"
    (archive / "2026-11").mkdir(parents=True)
    (archive / "2026-11" / "a.mitm.gz").write_bytes(gzip.compress(plain.read_bytes()))
    _har(archive / "b.har", [_entry("one"), _entry("two")])
    (archive / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (archive / "loop").symlink_to(archive, target_is_directory=True)  # not followed
    out = archive / "data"  # the dataset inside the folder it is read from
    r = CliRunner().invoke(cli, ["ingest", str(archive), "--out", str(out)])
    assert r.exit_code == 0, r.output
    first = len(load(out, "exchanges"))
    assert first > 500
    (archive / "notes.txt").write_text("not a capture")
    r = CliRunner().invoke(cli, ["ingest", str(archive), "--out", str(out)])  # again: nothing new, notes named
    assert r.exit_code == 1 and f"{archive / 'notes.txt'}: byte 0: not a mitmproxy flow file or HAR" in r.stderr
    assert ".parquet" not in r.stderr and "_text_policy" not in r.stderr  # the dataset's own files: not read
    assert len(load(out, "exchanges")) == first
    r = CliRunner().invoke(cli, ["ingest", str(out), "--out", str(out)])  # the dataset as its own input
    assert r.exit_code == 2 and f"no file under {out}" in r.stderr, r.output
    empty = tmp_path / "empty"
    empty.mkdir()
    r = CliRunner().invoke(cli, ["ingest", str(empty), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "no file under" in r.stderr


def test_an_xz_stream_cannot_ask_for_a_dictionary_of_gigabytes(plain: Path, tmp_path: Path) -> None:
    """The dictionary an xz header declares (up to 1.5 GiB) is filled as output goes: a 46 KB file of a 512 MiB
    dictionary took decompression to 323 MB. Such a stream is refused, saying what to do; streams one after the
    other (as `cat a.xz b.xz` makes) are read in turn."""
    big = [{"id": lzma.FILTER_LZMA2, "dict_size": 512 << 20, "mf": lzma.MF_HC3, "preset": 0}]
    bomb = tmp_path / "bomb.mitm.xz"
    bomb.write_bytes(lzma.compress(plain.read_bytes()[:4096], format=lzma.FORMAT_XZ, filters=big))
    result = ingest([bomb], tmp_path / "out", TextPolicy())
    assert [e.reason for e in result.errors] == [
        f"its decoder would need more than {compressed.XZ_MEMLIMIT >> 20} MiB of memory (the dictionary it declares): "
        "decompress it first (xz -d) and ingest the result"
    ]
    data = plain.read_bytes()
    two = tmp_path / "two.mitm.xz"
    padding = b"\0" * 8  # stream padding, which xz allows between and after streams
    two.write_bytes(lzma.compress(data[: len(data) // 2]) + padding + lzma.compress(data[len(data) // 2 :]) + padding)
    result = ingest([two], tmp_path / "out2", TextPolicy())
    assert not result.errors and result.exchanges > 500


def test_a_zstd_frame_of_a_gigabyte_window_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    """A frame may declare a window up to 2 GiB (`zstd --long=30`); the decoder refuses past 128 MiB, and ingest says
    how to read such a file instead of calling it damaged."""
    params = {zstd.CompressionParameter.window_log: 30, zstd.CompressionParameter.enable_long_distance_matching: 1}
    huge = tmp_path / "huge.mitm.zst"
    packer = zstd.ZstdCompressor(options=params)  # streamed: the frame states no content size, only its window
    huge.write_bytes(packer.compress(b"\0" * (1 << 20), zstd.ZstdCompressor.CONTINUE) + packer.flush())
    result = ingest([huge], tmp_path / "out", TextPolicy())
    assert [e.reason for e in result.errors] == [
        "its decoder would need more than 128 MiB of memory (the window it declares): "
        "decompress it first (zstd -d --long=31) and ingest the result"
    ]


def test_without_a_usable_temporary_folder_only_compressed_captures_are_refused(
    plain: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    packed = tmp_path / "c.mitm.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()[:50_000]))
    result = ingest([packed, plain], tmp_path / "out", TextPolicy())
    assert result.exchanges > 500  # the plain capture never needed the folder
    assert [(e.path, e.position) for e in result.errors] == [(packed, "byte 0")]
    assert "set TMPDIR to a writable one" in result.errors[0].reason


def _result_figures(result: IngestResult) -> tuple[int, int, int, int]:
    return result.flows, result.exchanges, result.duplicates, result.skipped


@pytest.mark.parametrize("jobs", [1, 2])
def test_compressed_captures_need_room_for_one_round_not_for_all_of_them(
    plain: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    """A year of compressed captures is read a round at a time: when the disk cannot hold the next decompressed copy
    beside the round's, the round is read and its copies removed before that capture is decompressed (all of them
    were decompressed first, so the disk had to hold the year). Same rows and the same figures as one ingest of the
    plain files, flows repeated in a later round counted as duplicates; progress runs over the files as given."""
    from tests.captures import write_capture

    other = write_capture(tmp_path / "other.mitm", 300, seed=5)
    files = [tmp_path / "a.mitm.gz", tmp_path / "b.mitm.zst", tmp_path / "c.mitm.xz", tmp_path / "d.mitm"]
    files[0].write_bytes(gzip.compress(plain.read_bytes()))
    files[1].write_bytes(zstd.compress(other.read_bytes()))
    files[2].write_bytes(lzma.compress(plain.read_bytes()))  # the flows of a.mitm.gz again
    files[3].write_bytes(other.read_bytes())  # plain, read where it is
    expected = ingest([plain, other, plain, other], tmp_path / "plain-out", TextPolicy())

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    one = plain.stat().st_size
    monkeypatch.setattr(
        compressed, "_room", lambda folder: int(1.2 * one) - sum(p.stat().st_size for p in folder.iterdir())
    )
    present: list[int] = []  # decompressed copies on the disk as each decompression starts
    real = compressed.decompress

    def watched(path: Path, name: str, folder: Path, read: Callable[[int], None] | None = None) -> Path:
        present.append(len(list(scratch.rglob("*.capture"))))
        return real(path, name, folder, read)

    monkeypatch.setattr(compressed, "decompress", watched)
    shown: list[tuple[int, int, int]] = []
    result = ingest(
        files, tmp_path / "out", TextPolicy(), jobs=jobs, part_bytes=256 * 1024, progress=lambda *a: shown.append(a)
    )
    assert not result.errors, result.errors
    assert _rows(tmp_path / "out") == _rows(tmp_path / "plain-out")
    assert _result_figures(result) == _result_figures(expected) and result.duplicates > 800
    assert present == [0, 1, 0, 1, 0]  # b did not fit beside a, nor c beside b: each was retried alone
    assert list(scratch.iterdir()) == []
    done = [d for d, _, _ in shown]
    assert done == sorted(done) and shown[-1] == (sum(f.stat().st_size for f in files), shown[-1][1], result.flows)
    assert shown[-1][1] == shown[-1][0]
    unpacking = [d for d, _, n in shown if n == 0]  # the bar moves while the first round is decompressed (a, part of b)
    first_two = files[0].stat().st_size + files[1].stat().st_size
    assert len(unpacking) > 2 and 0 < unpacking[-1] <= first_two * ingest_module.UNPACKING_SHARE


def test_a_round_ends_at_its_bytes_of_copies_and_errors_name_the_files_as_given(
    plain: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_plan, "ROUND_COPIES", 1)  # every compressed capture a round of its own
    data = plain.read_bytes()
    first, cut = tmp_path / "first.mitm.gz", tmp_path / "cut.mitm.gz"
    first.write_bytes(gzip.compress(data))
    packed = gzip.compress(data)
    cut.write_bytes(packed[: len(packed) // 2])
    notes = tmp_path / "notes.txt"
    notes.write_text("not a capture")
    result = ingest([first, notes, cut], tmp_path / "out", TextPolicy())
    assert [(e.path, e.position.endswith("of the decompressed capture")) for e in result.errors] == [
        (notes, False),
        (cut, True),  # where the gzip data stops
        (cut, True),  # the record it cut
    ]
    assert result.exchanges == len(_rows(tmp_path / "out")[0]) > 500
    assert result.duplicates == result.flows - 600 > 100  # the cut copy's flows were all read in the first round
