"""Parse KTS_APP lines (v1 from the article's tool, v2 from ours) into a typed table.

Robust to what real logs contain: CRLF endings, truncated last lines, tracebacks and
other output between lines, undecodable bytes. Valid lines are all kept; the rest are
counted. Epoch-ns values are parsed straight into int64 (never through a float), and
the work is done by Arrow's vectorised kernels, so millions of lines parse per second.

v1: ``KTS_APP,v1,<WORKLOAD>,<i>,<epoch_ns_start>,<epoch_ns_end>,<device_ms>,<phase>``
    (wall time = end - start; tenant = lower-cased workload unless the caller names it)
v2: ``KTS_APP,v2,<workload>,<tenant>,<i>,<phase>,<intended_ns>,<start_ns>,<end_ns>,<device_ms>,<wall_ms>``
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from kts_helpers.errors import LogParseError

_INT = r"\d{1,19}"
_NUM = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NAME = r"[^,\s]+"
V1_RE = rf"^KTS_APP,v1,{_NAME},{_INT},{_INT},{_INT},{_NUM},[^,]*$"
V2_RE = rf"^KTS_APP,v2,{_NAME},{_NAME},{_INT},[^,]*,{_INT},{_INT},{_INT},{_NUM},{_NUM}$"
V1_COLS = ["tag", "version", "workload", "iteration", "start_ns", "end_ns", "device_ms", "phase"]
V2_COLS = ["tag", "version", "workload", "tenant", "iteration", "phase", "intended_ns", "start_ns", "end_ns",
           "device_ms", "wall_ms"]
_TYPES = {"tag": pa.string(), "version": pa.string(), "workload": pa.string(), "tenant": pa.string(),
          "iteration": pa.int64(), "phase": pa.string(), "intended_ns": pa.int64(), "start_ns": pa.int64(),
          "end_ns": pa.int64(), "device_ms": pa.float64(), "wall_ms": pa.float64()}
_INT64_MAX = 2**63 - 1
COLUMNS = ["workload", "tenant", "iteration", "phase", "intended_ns", "start_ns", "end_ns", "device_ms",
           "wall_ms", "version"]


@dataclass
class ParsedLog:
    """The iterations of one or more logs, plus what could not be read."""

    frame: pd.DataFrame
    malformed: int = 0  # lines that start like KTS_APP but do not parse (truncated, mangled)
    other: int = 0  # non-empty lines that are not KTS lines (tracebacks, prints)
    meta: list[dict] = field(default_factory=list)  # KTS_META records
    sources: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.frame)


def _read_csv(blob: bytes, names: list[str]) -> pa.Table:
    return pacsv.read_csv(
        io.BytesIO(blob),
        read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
        parse_options=pacsv.ParseOptions(delimiter=","),
        convert_options=pacsv.ConvertOptions(column_types={k: _TYPES[k] for k in names},
                                             strings_can_be_null=False, quoted_strings_can_be_null=False),
    )


def parse_bytes(data: bytes, *, source: str = "<bytes>", tenant: str | None = None) -> ParsedLog:
    """Parse one log's bytes. Never raises on junk; returns an empty frame if nothing is valid.

    Fast path: Arrow's typed CSV reader over the whole file (clean logs, millions of lines a
    second), with rows of the wrong shape set aside by ``invalid_row_handler``. If a value
    fails to convert, or for the set-aside rows, the line-by-line regex path decides.
    """
    version = _sniff_version(data)
    if version is not None and data.isascii():  # non-ASCII bytes: leave them to the robust path
        fast = _fast_path(data, version)
        if fast is not None:
            table, skipped = fast
            rest = _robust(b"\n".join(skipped)) if skipped else ParsedLog(frame=_empty())
            frames = [f for f in (_to_frame(table, tenant), _with_tenant(rest.frame, tenant)) if len(f)]
            frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else (frames[0] if frames else _empty())
            return ParsedLog(frame=frame, malformed=rest.malformed, other=rest.other, meta=rest.meta,
                             sources=[source])
    rest = _robust(data)
    return ParsedLog(frame=_with_tenant(rest.frame, tenant), malformed=rest.malformed, other=rest.other,
                     meta=rest.meta, sources=[source])


def _sniff_version(data: bytes) -> str | None:
    i = data.find(b"KTS_APP,v")
    if i < 0:
        return None
    v = data[i + 8: i + 10]
    return {b"v1": "v1", b"v2": "v2"}.get(v)


def _fast_path(data: bytes, version: str) -> tuple[pa.Table, list[bytes]] | None:
    names = V2_COLS if version == "v2" else V1_COLS
    skipped: list[bytes] = []

    def set_aside(row) -> str:
        skipped.append(row.text.encode("utf-8", "surrogateescape") if isinstance(row.text, str) else row.text)
        return "skip"

    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22),
            parse_options=pacsv.ParseOptions(quote_char=False, escape_char=False, double_quote=False,
                                             invalid_row_handler=set_aside),
            convert_options=pacsv.ConvertOptions(column_types={k: _TYPES[k] for k in names},
                                                 strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    ok = pc.and_(pc.equal(table["tag"], "KTS_APP"), pc.equal(table["version"], version))
    if not pc.all(ok).as_py() or not _plausible(table):
        return None
    return table, skipped


def _plausible(table: pa.Table) -> bool:
    """Whether every row is one the regexes would accept too; if not, the robust path decides.

    Arrow converts what the line format forbids: an empty field (a line cut right after a comma)
    to null, ``nan``/``inf``/``NA`` to floats or nulls, ``-1`` to a negative iteration.
    """
    for name in table.column_names:
        col = table[name]
        if col.null_count:
            return False
        if pa.types.is_integer(col.type) and len(col) and pc.min(col).as_py() < 0:
            return False
        if pa.types.is_floating(col.type) and not pc.all(pc.is_finite(col)).as_py():
            return False
    for name in ("workload", "tenant"):
        if name in table.column_names and not pc.all(pc.match_substring_regex(table[name], rf"^{_NAME}$")).as_py():
            return False
    return True


def _robust(data: bytes) -> ParsedLog:
    """Line by line (vectorised regexes): keeps every valid line, counts the rest."""
    lines = _strip_cr(pa.array(data.split(b"\n"), pa.binary()))
    nonempty = pc.greater(pc.binary_length(lines), 0)
    is_app = pc.starts_with(lines, "KTS_APP,")
    is_meta = pc.starts_with(lines, "KTS_META,")
    ok1 = pc.match_substring_regex(lines, V1_RE)
    ok2 = pc.match_substring_regex(lines, V2_RE)
    frames = []
    refused = 0
    for ok, names in ((ok2, V2_COLS), (ok1, V1_COLS)):
        chosen = lines.filter(ok)
        if len(chosen):
            table, n_refused = _read_lines(chosen.to_pylist(), names)
            refused += n_refused
            if table is not None:
                frames.append(_to_frame(table, None))
    n_valid = (pc.sum(pc.or_(ok1, ok2)).as_py() or 0) - refused
    n_app = pc.sum(is_app).as_py() or 0
    malformed = n_app - n_valid
    other = (pc.sum(nonempty).as_py() or 0) - n_app - (pc.sum(is_meta).as_py() or 0)
    meta = []
    for raw in lines.filter(is_meta).to_pylist():
        try:
            meta.append(json.loads(raw.split(b",", 2)[2]))
        except (ValueError, IndexError):
            malformed += 1
    frame = pd.concat(frames, ignore_index=True) if frames else _empty()
    return ParsedLog(frame=frame, malformed=int(malformed), other=int(other), meta=meta)


def _read_lines(lines: list[bytes], names: list[str]) -> tuple[pa.Table | None, int]:
    """Read lines that match the format; drop (and count) those Arrow still refuses.

    A line can match the regex and yet not convert: a 19-digit value past int64, or
    undecodable bytes inside a name. Those are malformed lines, not a reason to fail.
    """
    try:
        return _read_csv(b"\n".join(lines) + b"\n", names), 0
    except pa.ArrowInvalid:
        keep = [ln for ln in lines if _convertible(ln, names)]
        table = _read_csv(b"\n".join(keep) + b"\n", names) if keep else None
        return table, len(lines) - len(keep)


def _convertible(line: bytes, names: list[str]) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    fields = line.split(b",")
    return all(int(v) <= _INT64_MAX for v, n in zip(fields, names, strict=True) if _TYPES[n] == pa.int64())


def _with_tenant(frame: pd.DataFrame, tenant: str | None) -> pd.DataFrame:
    if tenant and len(frame):
        frame = frame.copy()
        frame["tenant"] = tenant
    return frame


def _strip_cr(lines: pa.Array) -> pa.Array:
    """Drop a trailing CR (CRLF files) without decoding: undecodable bytes stay bytes."""
    has_cr = pc.ends_with(lines, "\r")
    if not pc.any(has_cr).as_py():
        return lines
    lengths = pc.subtract(pc.binary_length(lines), pc.cast(has_cr, pa.int32()))
    return pa.array([b[:n] for b, n in zip(lines.to_pylist(), lengths.to_pylist(), strict=True)], pa.binary())


def _to_frame(table: pa.Table, tenant: str | None) -> pd.DataFrame:
    df = table.to_pandas()
    if "tenant" not in df:  # v1
        df["workload"] = df["workload"].str.lower()
        df["tenant"] = tenant or df["workload"]
        df["intended_ns"] = df["start_ns"]
        df["wall_ms"] = (df["end_ns"] - df["start_ns"]).to_numpy(np.int64) / 1e6
    elif tenant:
        df["tenant"] = tenant
    return df[COLUMNS]


def _empty() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series(dtype="int64") for c in COLUMNS})
    for c in ("workload", "tenant", "phase", "version"):
        df[c] = df[c].astype(object)
    for c in ("device_ms", "wall_ms"):
        df[c] = df[c].astype("float64")
    return df


def parse_file(path: str | os.PathLike, *, tenant: str | None = None) -> ParsedLog:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise LogParseError(f"log file {p} does not exist") from None
    except IsADirectoryError:
        raise LogParseError(f"{p} is a directory, not a log file") from None
    return parse_bytes(data, source=str(p), tenant=tenant)


def parse_files(paths: list[str | os.PathLike], *, require: bool = True) -> ParsedLog:
    """Parse several logs into one table; ``source`` says which file each row came from."""
    parts = []
    out = ParsedLog(frame=_empty())
    for path in paths:
        parsed = parse_file(path)
        parsed.frame["source"] = str(path)
        parts.append(parsed.frame)
        out.malformed += parsed.malformed
        out.other += parsed.other
        out.meta.extend(parsed.meta)
        out.sources.append(str(path))
    if parts:
        out.frame = pd.concat(parts, ignore_index=True)
    if require and out.n == 0:
        names = ", ".join(str(p) for p in paths) or "(no files)"
        raise LogParseError(f"no valid KTS_APP lines in {names}")
    return out
