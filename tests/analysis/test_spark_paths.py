"""`--engine spark` over a dataset whose root path holds what Hadoop takes for a glob (`*`, `?`, `[`, `]`, `{`,
`}`, `\\`), beside the folders that glob would match: Spark reads the root given and no other, as DuckDB does
(tests/store/test_dataset_hunt.py), and its report equals DuckDB's. One Spark session (`local[2]`) for the module."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from converse_tap.analysis.spark import hadoop_literal
from tests.analysis.test_spark import both
from tests.cli_helpers import invoke
from tests.store.test_dataset_hunt import _dataset

# each root, and the folders beside it that it matched as a glob (`{a,b}` is one of two, `{x}` is `x`)
ODD = {
    "run[1]": ["run1"],
    "br{a,b}ce": ["brace", "brbce"],
    "a*b": ["aXb"],
    "q?x": ["qZx"],
    "{x} b\\s %20 #1": ["x bs %20 #1"],
}


def test_a_path_is_given_to_spark_as_a_pattern_of_itself_alone() -> None:
    assert hadoop_literal("/d/run[1]/a*b?{x,y}\\z].parquet") == "/d/run\\[1\\]/a\\*b\\?\\{x,y\\}\\\\z\\].parquet"
    assert hadoop_literal("/d/sp ace %20 #, ü.parquet") == "/d/sp ace %20 #, ü.parquet"


@pytest.mark.parametrize("name", sorted(ODD))
def test_spark_reads_an_odd_root_and_no_folder_its_glob_matches(name: str, tmp_path: Path, spark: object) -> None:
    """Each root beside folders its name, as a glob, matches, holding the same files and more (a backup, a
    neighbouring run): Spark read theirs instead of the root's (or failed on a `basePath` that was no parent of
    them); now both engines count the root's 4 exchanges alone."""
    root = _dataset(tmp_path / name, writers=2, per=2)
    for decoy in ODD[name]:
        shutil.copytree(root, tmp_path / decoy)
        _dataset(tmp_path / decoy, writers=1, per=5, tag="decoy")
    duck, spk = both(root, spark)
    assert json.loads(duck)["dataset"]["exchanges"] == 4
    assert spk == duck


def test_cli_spark_over_a_relative_odd_root_through_a_link(
    tmp_path: Path,
    spark: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A root relative to a working directory the running JVM does not share (chdir after Spark started), reached
    through a symbolic link whose name is a glob too."""
    root = _dataset(tmp_path / "run[1]", writers=1, per=3)
    _dataset(tmp_path / "run1", writers=1, per=5, tag="decoy")
    (tmp_path / "l*nk").symlink_to(root)
    monkeypatch.chdir(tmp_path)
    for spelt in ("run[1]", "./l*nk/"):
        duck = invoke("report", spelt, "--format", "json")
        spk = invoke("report", spelt, "--format", "json", "--engine", "spark")
        assert spk.exit_code == 0, (spelt, spk.output)
        assert json.loads(spk.stdout) == json.loads(duck.stdout)
        assert json.loads(spk.stdout)["dataset"]["exchanges"] == 3
