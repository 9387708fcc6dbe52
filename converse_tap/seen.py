"""Exchange ids already in a dataset or already read: re-ingesting a capture, or a capture that holds the same
flow twice, adds no second row. Ids are kept as 64-bit digests in sorted NumPy arrays (8 bytes each) plus a small
set of recent ones, so a year of captures fits in a few tens of MiB."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .store import objstore

_MERGE = 1 << 18  # recent ids held in a set before they are merged into the sorted array


def digest(exchange_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(exchange_id.encode("utf-8", "surrogatepass"), digest_size=8).digest())


class SeenIds:
    def __init__(self, known: np.ndarray | None = None) -> None:
        self._sorted = np.unique(known) if known is not None else np.empty(0, dtype=np.uint64)
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, h: int) -> bool:
        if h in self._recent:
            return True
        arr = self._sorted
        i = int(np.searchsorted(arr, h))
        return i < len(arr) and int(arr[i]) == h

    def add(self, h: int) -> bool:
        """Remember `h`; False when it was already there."""
        if h in self:
            return False
        self._recent.add(h)
        if len(self._recent) >= _MERGE:
            self._merge()
        return True

    def _merge(self) -> None:
        recent = np.fromiter(self._recent, dtype=np.uint64, count=len(self._recent))
        self._sorted = np.union1d(self._sorted, recent)
        self._recent.clear()

    def array(self) -> np.ndarray:
        self._merge()
        return self._sorted


def dataset_ids(root: str | Path) -> np.ndarray:
    """Digests of the exchange ids of a dataset's Parquet files (an empty array for a new dataset)."""
    fs = None
    if objstore.is_remote(root):
        remote = objstore.parse(str(root))
        fs = remote.fs
        files = [i.path for i in objstore.list_files(remote, "exchanges") if i.path.endswith(".parquet")]
    else:
        folder = Path(root) / "exchanges"
        files = (
            sorted(str(p) for p in folder.rglob("*.parquet") if not p.name.startswith(".")) if folder.is_dir() else []
        )
    if not files:
        return np.empty(0, dtype=np.uint64)
    out: list[np.ndarray] = []
    for path in files:
        try:  # a foreign file in the dataset is the report's business, not a reason to refuse an ingest
            source = fs.open_input_file(path) if fs is not None else path
            for batch in pq.ParquetFile(source).iter_batches(columns=["exchange_id"], batch_size=65536):
                out.append(_digests(batch.column(0).to_pylist()))
        except (OSError, ValueError, KeyError, pa.ArrowException):
            continue
    return np.unique(np.concatenate(out)) if out else np.empty(0, dtype=np.uint64)


def _digests(ids: Iterable[str | None]) -> np.ndarray:
    return np.fromiter((digest(i) for i in ids if i is not None), dtype=np.uint64)
