"""The lesson's measured tables kept on disk, keyed by everything they are computed from.

Why: the MPS section reads every committed reference that measured MPS through the report's own comparison
(``analyse.compare.modes_table``: loading the logs, the verdicts, bootstrap intervals), which takes tens of
seconds, and every opening of the lesson computed it again from the same files. The key is a digest of the
references' bytes (manifest and logs), of the kit's own source (``kts_helpers``: any change to the analysis
is a new key) and of the arguments, so a stored table is one that computing it now would give, to the bit
(Parquet keeps float64 exactly). Nothing is ever stale: a changed byte is a new file.

Where, and the key's rule: ``kts_helpers.diskcache``. A folder that cannot be written, or a stored file that
cannot be read, only means computing the table: the cache never fails a lesson.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from kts_helpers.diskcache import cache_dir, key, stored_or_computed
from kts_helpers.fsutil import atomic_write_bytes


def table(name: str, run_dirs: list[Path], compute: Callable[[], pd.DataFrame], **arguments: object) -> pd.DataFrame:
    """``compute()``, or the table it gave before for the same files, source and arguments."""
    return stored_or_computed(cache_dir() / f"{name}-{key(run_dirs, **arguments)}.parquet", _read, compute, _write)


def _read(path: Path) -> pd.DataFrame | None:
    try:
        return pd.read_parquet(path)
    except Exception:  # noqa: BLE001 - absent, unreadable or cut short: compute it
        return None


def _write(path: Path, frame: pd.DataFrame) -> None:
    buf = io.BytesIO()
    frame.to_parquet(buf, index=False)
    atomic_write_bytes(path, buf.getvalue())
