"""Derived results kept on disk, keyed by everything they are computed from: the one home of that rule.

Why: some derivations read many files and take seconds (the lesson's MPS table over every reference, tens of
seconds; the planner's GPU model from the probe runs' bootstrap), and every call computed them again from the same
bytes. The key is a digest of the kit's own source (``kts_helpers``: any change to how a thing is derived is a new
key), of the input directories' files and of the arguments, so a stored result is the one computing it now would
give. Nothing is ever stale: a changed byte is a new file.

Where: ``$KTS_CACHE_DIR``, else ``$XDG_CACHE_HOME/kts``, else ``~/.cache/kts``. A folder that cannot be written,
or a stored file that cannot be read, only means computing again: callers never fail on the cache. Two processes
that miss the same result at once compute it once (``stored_or_computed``): the second waits for the first and reads it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

PACKAGE = Path(__file__).resolve().parent
T = TypeVar("T")


def cache_dir() -> Path:
    """Where stored results live (see the module's docstring)."""
    if os.environ.get("KTS_CACHE_DIR"):
        return Path(os.environ["KTS_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kts"


def _digest_files(h: Any, root: Path, files: Iterable[Path]) -> None:
    for f in sorted(files):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())


def key(dirs: Iterable[str | os.PathLike], **arguments: object) -> str:
    """A digest of the kit's source, the files under ``dirs`` (hidden ones aside) and ``arguments``."""
    h = hashlib.sha256()
    _digest_files(h, PACKAGE, PACKAGE.rglob("*.py"))
    for d in map(Path, dirs):
        h.update(d.name.encode() + b"\0")
        _digest_files(h, d, (p for p in d.rglob("*") if p.is_file() and not p.name.startswith(".")))
    h.update(repr(sorted(arguments.items())).encode())
    return h.hexdigest()[:32]


def stored_or_computed(path: Path, read: Callable[[Path], T | None], compute: Callable[[], T],
                       write: Callable[[Path, T], None]) -> T:
    """The result stored at ``path`` (``read`` gives None where it is absent or unreadable), else ``compute()``,
    stored by ``write`` (an ``OSError`` there only means computing next time). Two processes that miss it at once
    compute it once: an exclusive lock on ``<path>.lock`` is held while it is computed, and the second reads it
    again inside. Why: the test suite's renders of the lesson, on two workers, each computed its MPS table at once
    (tens of seconds each on two busy cores). A folder where no lock can be made holds none."""
    found = read(path)
    if found is not None:
        return found
    with _locked(path):
        found = read(path)
        if found is not None:
            return found
        value = compute()
        with contextlib.suppress(OSError):  # a read-only home: the caller still gets its result
            write(path, value)
    return value


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 - held across the yield
    except OSError:
        yield
        return
    with fh:
        with contextlib.suppress(OSError):
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(fh, fcntl.LOCK_UN)
