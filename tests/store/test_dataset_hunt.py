"""Local datasets that change while they are read (a recorder rolling over, files renamed, removed or cut short
between the listing and the reading), and dataset roots with odd names (pattern characters, quotes, spaces,
unicode, a symbolic link, relative and trailing-slash spellings)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from converse_tap.analysis import load as load_module
from converse_tap.analysis import sources
from converse_tap.analysis.engine import Engine
from converse_tap.analysis.load import load_frames
from converse_tap.analysis.sources import literal_pattern, scan_of
from converse_tap.store import journals as journals_module
from converse_tap.store import objstore
from converse_tap.store.changes import DatasetChanged, settle
from converse_tap.store.reader import TableFiles, read_journals, table_files
from converse_tap.store.writer import DatasetWriter
from tests.cli_helpers import invoke
from tests.factories import a2a_flow, agent_message, jsonrpc_result, write_dataset


def _dataset(root: Path, writers: int = 3, per: int = 2, tag: str = "ex") -> Path:
    """`writers` datasets' worth of exchanges in one dataset: one Parquet file per writer and table."""
    for w in range(writers):
        flows = [a2a_flow(response=jsonrpc_result(agent_message(mid=f"{tag}-m{w}-{i}"))) for i in range(per)]
        write_dataset(root, flows, id_format=f"{tag}-{w}-{{:03d}}")
    return root


def _remove(path: Path) -> None:
    path.unlink()


def _rename(path: Path) -> None:  # as a roll-over or a compaction may
    path.rename(path.with_name("part-renamed.parquet"))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


def _garbage(path: Path) -> None:  # the same size, no longer Parquet
    path.write_bytes(b"PAR1" + b"\0" * (path.stat().st_size - 4))


CHANGES: dict[str, Callable[[Path], None]] = {
    "removed": _remove,
    "renamed": _rename,
    "truncated": _truncate,
    "overwritten": _garbage,
}
HOW = {"removed": "is gone", "renamed": "is gone", "truncated": "was replaced", "overwritten": "was replaced"}


def _racing(
    monkeypatch: pytest.MonkeyPatch,
    module: Any,
    change: Callable[[Any], None],
    hit: list[str],
    every: bool = False,
    name: Callable[[str], Any] = Path,
) -> None:
    """`module.table_files` changes the second messages file right after listing it (once, or `every` time): the
    race of a dataset changed between listing and reading, made certain. `change` is given the file as `name`
    makes it (a local Path; an object's key as listed, `str`)."""
    real = table_files

    def listing(root: Any, table: str, *args: Any) -> TableFiles:
        out = real(root, table, *args)
        if table == "messages" and (every or not hit) and len(out.files) > 1:
            hit.append(out.files[1])
            change(name(out.files[1]))
        return out

    monkeypatch.setattr(module, "table_files", listing)


@pytest.mark.parametrize("how", sorted(CHANGES))
def test_a_file_changed_between_listing_and_reading_is_named_with_what_to_do(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _dataset(tmp_path / "data")
    hit: list[str] = []
    _racing(monkeypatch, sources, CHANGES[how], hit)
    with pytest.raises(DatasetChanged) as e:
        Engine.over_dataset(root).close()
    assert len(e.value.changed) == 1 and e.value.changed[0][0] == hit[0]
    assert e.value.changed[0][1].startswith(HOW[how]) and "run the command again" in str(e.value)


@pytest.mark.parametrize("how", sorted(CHANGES))
def test_a_report_reads_again_a_dataset_that_changed_once_under_it(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One change while the report ran (a roll-over, a rename, a file cut short): the report reads the dataset as
    it is now. A renamed file's rows are counted under its new name; a damaged one is named as skipped."""
    root = _dataset(tmp_path / "data")
    hit: list[str] = []
    _racing(monkeypatch, sources, CHANGES[how], hit)
    r = invoke("report", str(root), "--format", "json")
    assert r.exit_code == 0 and hit, r.output
    report = json.loads(r.stdout)
    assert report["dataset"]["exchanges"] == 6
    if HOW[how] == "was replaced":
        assert f"warning: skipped {hit[0]}: not a Parquet file" in r.stderr
    else:
        assert "warning" not in r.stderr


def test_a_dataset_that_keeps_changing_under_a_report_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _dataset(tmp_path / "data")
    hit: list[str] = []
    n = iter(range(100))
    _racing(monkeypatch, sources, lambda p: p.rename(p.with_name(f"part-moved-{next(n)}.parquet")), hit, every=True)
    r = invoke("report", str(root), "--format", "json")
    assert r.exit_code == 2, r.output
    assert hit[-1] in r.stderr and "changed while it was being read" in r.stderr and "run the command again" in r.stderr
    assert "Traceback" not in r.output and r.stdout == ""


def test_sql_over_a_dataset_changed_under_it_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _dataset(tmp_path / "data")
    hit: list[str] = []
    _racing(monkeypatch, sources, _truncate, hit)
    r = invoke("sql", str(root), "SELECT count(*) AS n FROM messages", "--format", "csv")
    assert r.exit_code == 2 and hit, r.output
    assert f"{hit[0]} was replaced (not a Parquet file now)" in r.stderr and "run the command again" in r.stderr
    assert "Traceback" not in r.output and r.stdout == ""


def test_a_file_removed_while_the_engine_reads_is_named(tmp_path: Path) -> None:
    """Removed after the engine was built, while its queries run (the long part of a report)."""
    root = _dataset(tmp_path / "data")
    engine = Engine.over_dataset(root)
    try:
        gone = engine.listed["messages"].files[0]
        os.unlink(gone)
        with pytest.raises(duckdb.Error) as e:
            engine.con.sql("SELECT count(*) FROM sightings").fetchall()
        changed = settle(e.value, engine.root, engine.listed)
        assert isinstance(changed, DatasetChanged) and changed.changed == [(gone, "is gone (removed or renamed)")]
        other = duckdb.ParserException("no such thing")  # the files as listed: the error is left as it is
        assert settle(other, engine.root, {"exchanges": engine.listed["exchanges"]}) is other
    finally:
        engine.close()


def test_a_report_whose_files_keep_moving_while_its_queries_run_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _dataset(tmp_path / "data")
    real = Engine.over_dataset.__func__  # type: ignore[attr-defined]
    moved: list[str] = []

    def built_then_moved(cls: type[Engine], *args: Any, **kwargs: Any) -> Engine:
        engine = real(cls, *args, **kwargs)
        for f in engine.listed["messages"].files:  # after the engine was built: while its queries run
            os.rename(f, f.replace("part-", f"part-{len(moved)}"))
            moved.append(f)
        return engine

    monkeypatch.setattr(Engine, "over_dataset", classmethod(built_then_moved))
    r = invoke("report", str(root), "--format", "json")
    assert r.exit_code == 2 and moved, r.output
    assert "changed while it was being read" in r.stderr and moved[-1] in r.stderr
    assert "Traceback" not in r.output and r.stdout == ""


def test_load_frames_names_a_file_that_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _dataset(tmp_path / "data")
    hit: list[str] = []
    _racing(monkeypatch, load_module, _truncate, hit)
    with pytest.raises(DatasetChanged, match="was replaced"):
        load_frames(root)
    assert hit


def test_a_journal_rolled_over_between_listing_and_reading_is_no_foreign_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal listed and then removed by its writer's roll-over: its rows are in a Parquet file now, and no
    warning calls it unreadable."""
    root = tmp_path / "data"
    w = DatasetWriter(root, flush_interval=60, rollover_rows=10**9)
    w.start()
    w.submit(_extraction())
    w.flush()
    real = journals_module.read_journal

    def rolled(path: Path, table: str | None = None) -> tuple[pa.Table | None, bool]:
        path.unlink()
        return real(path, table)

    monkeypatch.setattr(journals_module, "read_journal", rolled)
    found = read_journals(root)
    w.close()
    assert found.vanished and not found.foreign and not found.paths


def _extraction() -> Any:
    from converse_tap.a2a.extract import extract
    from converse_tap.a2a.redact import TextPolicy
    from converse_tap.addon.flows import exchange_from_flow

    flow = a2a_flow(response=jsonrpc_result(agent_message()))
    flow.id = "ex-journal"
    return extract(exchange_from_flow(flow), TextPolicy())


# odd names -------------------------------------------------------------------------------------------------------

ODD = ["run[1]", "a*b", "q?x", "[*]", "**", "sp ace", "ünï cödé", "br{a,b}ce", "com,ma", "quo'te", 'dq"uote', "b\\s"]
DECOYS = {"run[1]": "run1", "a*b": "aXb", "q?x": "qZx", "[*]": "*", "**": "zz"}  # what each, as a pattern, matches


@pytest.mark.parametrize("name", ODD)
def test_a_dataset_under_an_odd_name_reads_its_own_files_only(name: str, tmp_path: Path) -> None:
    """A root path holding `*?[` was a pattern to DuckDB: under `run[1]`, beside a copy in `run1`, each file was
    read from both (every figure doubled). Quotes, commas, braces, spaces and unicode are names like any other."""
    root = _dataset(tmp_path / name, writers=2, per=2)
    if name in DECOYS:  # a copy beside it (a backup, say): the same file names, which the pattern matched too
        shutil.copytree(root, tmp_path / DECOYS[name])
        _dataset(tmp_path / DECOYS[name], writers=1, per=5, tag="decoy")
    r = invoke("report", str(root), "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["dataset"]["exchanges"] == 4
    q = invoke("sql", str(root), "SELECT count(*) AS n FROM exchanges WHERE exchange_id LIKE 'ex-%'", "--format", "csv")
    assert q.exit_code == 0 and q.stdout == "n\n4\n", q.output
    q = invoke("sql", str(root), "SELECT count(*) AS n FROM exchanges", "--format", "csv")
    assert q.stdout == "n\n4\n"


def test_a_root_spelt_otherwise_or_reached_through_a_link_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _dataset(tmp_path / "data set", writers=1, per=3)
    (tmp_path / "link").symlink_to(root)
    monkeypatch.chdir(tmp_path)
    for spelt in (
        "data set",
        "data set/",
        "./data set",
        "link",
        "link/",
        str(tmp_path / "link"),
        "../" + tmp_path.name + "/data set",
    ):
        r = invoke("report", spelt, "--format", "json")
        assert r.exit_code == 0 and json.loads(r.stdout)["dataset"]["exchanges"] == 3, (spelt, r.output)
        q = invoke("sql", spelt, "SELECT count(*) AS n FROM messages", "--format", "csv")
        assert q.exit_code == 0 and q.stdout == "n\n6\n", (spelt, q.output)


def test_the_recover_advice_quotes_a_root_with_spaces(tmp_path: Path) -> None:
    """The journals of a writer that died are named with the command to keep them; a root with a space in it is
    quoted there, so that the command runs as shown."""
    root = tmp_path / "my data"
    w = DatasetWriter(root, flush_interval=60, rollover_rows=10**9)
    w.start()
    w.submit(_extraction())
    w.flush()
    shutil.copytree(w.dir, w.dir.with_name("dead-writer"))  # its lock unheld: a writer that died
    w.close()
    notes = load_module.journal_notes(read_journals(root), root)
    assert any(f"converse-tap recover '{root}'" in n for n in notes), notes


def test_literal_pattern_matches_the_name_alone(tmp_path: Path) -> None:
    assert literal_pattern("/d/run[1]/a*b?.parquet") == "/d/run[[]1]/a[*]b[?].parquet"
    assert literal_pattern("/d/plain {x},'y'.parquet") == "/d/plain {x},'y'.parquet"
    root = _dataset(tmp_path / "x[*]y", writers=1, per=1)
    files = table_files(root, "exchanges").files
    assert duckdb.sql(f"SELECT count(*) FROM {scan_of(root, files)}").fetchall() == [(1,)]


def test_journal_folders_of_prefixes_alike_are_distinct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`a b`, `a_b`, `a/b` and `a__b` were one local journal folder: a report over one read the others' rows."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    prefixes = ["a b", "a_b", "a/b", "a__b", "a?b", "ä"]
    folders = {objstore.default_journal_dir(objstore.parse(f"s3://bkt/{p}")) for p in prefixes}
    assert len(folders) == len(prefixes)
    plain = objstore.default_journal_dir(objstore.parse("s3://bkt/fleet/data"))
    assert plain == tmp_path / "converse-tap" / "journals" / "bkt" / "fleet__data"  # as before: found again


def test_a_prefix_may_hold_what_a_url_would_not(tmp_path: Path) -> None:
    assert objstore.parse("s3://bkt/runs?/a#b/[1]").prefix == "runs?/a#b/[1]"
    for bad in ("s3://bk?t/x", "s3://[bkt/x", "s3://u@bkt/x", "s3:///x", "s3://bkt/a/../b"):
        with pytest.raises(ValueError):
            objstore.parse(bad)


def test_every_reason_the_recorder_gives_for_a_loss_reads_as_a_sentence() -> None:
    """Each `capture_gaps.reason` the addon writes (count_lost / _lost calls) has its words in the report's notes:
    a reason added without them would print as a bare code."""
    import re

    from converse_tap.analysis.sources import _GAP_REASONS

    source = "".join(
        (Path(__file__).parents[2] / "converse_tap" / "addon" / m).read_text() for m in ("tap.py", "channel.py")
    )
    written = set(re.findall(r'(?:count_lost|_lost)\(\s*"([a-z_]+)"', source))
    assert {"recorder_stopped", "worker_died", "worker_down", "recorder_backlog_full"} <= written
    assert written <= set(_GAP_REASONS)


def test_sql_whose_file_goes_while_its_query_runs_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file renamed after `sql` opened its views (a recorder's roll-over, while the query runs): named as a change
    of the dataset, exit 2, not blamed on the query."""
    from converse_tap.analysis import drill

    root = _dataset(tmp_path / "data")
    real = drill.run_query
    gone: list[str] = []

    def rolled_over_first(engine: Engine, query: str) -> Any:
        path = engine.listed["messages"].files[0]
        os.rename(path, path + ".moved")
        gone.append(path)
        return real(engine, query)

    monkeypatch.setattr(drill, "run_query", rolled_over_first)
    r = invoke("sql", str(root), "SELECT count(*) AS n FROM messages", "--format", "csv")
    assert r.exit_code == 2 and gone, r.output
    assert f"{gone[0]} is gone (removed or renamed)" in r.stderr and "run the command again" in r.stderr
    assert "Traceback" not in r.output and "reaches outside" not in r.stderr
