"""Atomic file writes: a reader never sees half a file, and a crash never leaves one.

Files get the permissions the user's umask gives any new file (0644 under the usual 0022), so a
report, its index or a run directory can be published by a web server as written. (``tempfile.mkstemp``
would make every file 0600: its temporary file is private by design, and the rename keeps that mode.)
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any


def _create_temp(directory: Path, name: str) -> tuple[int, Path]:
    """A new, exclusive temporary file next to the target, created with mode 0666 less the umask."""
    for _ in range(100):
        tmp = directory / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temporary file next to {directory / name}")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write to a temporary file in the same directory, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path.parent, path.name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_new(path: str | os.PathLike, data: bytes) -> Path:
    """Atomically create ``path``; refuse if it exists (raw data is never overwritten)."""
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; raw data is never overwritten")
    return atomic_write_bytes(path, data)
