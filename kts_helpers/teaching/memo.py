"""The lesson's measured tables kept on disk, keyed by everything they are computed from.

Why: the MPS section reads every committed reference that measured MPS through the report's own comparison
(``analyse.compare.modes_table``: loading the logs, the verdicts, bootstrap intervals), which takes tens of
seconds, and every opening of the lesson computed it again from the same files. The key is a digest of the
references' bytes (manifest and logs), of the kit's own source (``kts_helpers``: any change to the analysis
is a new key) and of the arguments, so a stored table is one that computing it now would give, to the bit
(Parquet keeps float64 exactly). Nothing is ever stale: a changed byte is a new file.

Where: ``$KTS_CACHE_DIR``, else ``$XDG_CACHE_HOME/kts``, else ``~/.cache/kts``. A folder that cannot be
written, or a stored file that cannot be read, only means computing the table: the cache never fails a lesson.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from kts_helpers.fsutil import atomic_write_bytes

PACKAGE = Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    """Where the tables live (see the module's docstring)."""
    if os.environ.get("KTS_CACHE_DIR"):
        return Path(os.environ["KTS_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kts"


def _digest_files(h: Any, root: Path, files: Iterable[Path]) -> None:
    for f in sorted(files):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())


def key(run_dirs: Iterable[str | os.PathLike], **arguments: object) -> str:
    """A digest of the runs' files, the kit's source and ``arguments``."""
    h = hashlib.sha256()
    _digest_files(h, PACKAGE, PACKAGE.rglob("*.py"))
    for d in map(Path, run_dirs):
        h.update(d.name.encode() + b"\0")
        _digest_files(h, d, (p for p in d.rglob("*") if p.is_file() and not p.name.startswith(".")))
    h.update(repr(sorted(arguments.items())).encode())
    return h.hexdigest()[:32]


def table(name: str, run_dirs: list[Path], compute: Callable[[], pd.DataFrame], **arguments: object) -> pd.DataFrame:
    """``compute()``, or the table it gave before for the same files, source and arguments."""
    path = cache_dir() / f"{name}-{key(run_dirs, **arguments)}.parquet"
    try:
        return pd.read_parquet(path)
    except Exception:  # noqa: BLE001 - absent, unreadable or cut short: compute it
        pass
    frame = compute()
    try:
        buf = io.BytesIO()
        frame.to_parquet(buf, index=False)
        atomic_write_bytes(path, buf.getvalue())
    except OSError:
        pass  # a read-only home: the lesson still gets its table
    return frame
