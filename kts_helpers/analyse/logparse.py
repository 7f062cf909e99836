"""Parse KTS_APP lines (v1 from the article's tool, v2 from ours) into a typed table of possible lines only.

Robust to what real logs contain: CRLF endings, truncated last lines, tracebacks and other output between
lines, undecodable bytes. Every valid line is kept; the rest are counted: ``malformed`` (starts like a
KTS_APP line but does not parse), ``other`` (not a KTS line), and ``rejected`` by reason: lines that parse
but cannot be true (``REJECT_REASONS``):

* a time that is not a finite positive number (``nan``, ``1e400`` -> inf, a negative or zero duration, a
  zero or negative epoch), an iteration below 0, an empty name;
* ``end_ns`` before ``start_ns``;
* ``device_ms`` above ``wall_ms`` by more than ``DEVICE_TOL_MS`` + ``DEVICE_TOL_REL`` x wall: CUDA events are
  recorded inside the host's launch-to-sync window, so device time cannot exceed it beyond clock resolution;
* (v2) ``wall_ms`` (monotonic clock) differing from ``end_ns - start_ns`` (epoch clock, read just outside it)
  by more than ``SPAN_TOL_MS`` + ``SPAN_TOL_REL`` x wall below it (the epoch reads enclose the monotonic ones)
  or ``SPAN_SLACK_MS`` + ``SPAN_TOL_REL`` x wall above it (a busy host may preempt the worker between the reads:
  such a line is real, and often one of the slow ones, so it must stay);
* a duplicate: the same (tenant, iteration, phase) again at the same start, or an iteration number a
  tenant's timed (or padding) counter had already left (a restarted or concatenated log). An llm
  iteration's decode steps share one iteration number and follow each other: not duplicates.

A rejected line never aborts anything downstream: it is not in the table. Epoch-ns values are parsed
straight into int64 (never through a float). Speed: Arrow's typed CSV reader reads the whole file (rows of
another shape are set aside for the line-by-line path); a value that does not convert sends only that
file's *conversion* to Arrow's string reader plus vectorised checks, never to the line-by-line path; the
checks above are vectorised masks over the frame's own numpy columns (no second copy of the table), so one
odd line costs the same as none. ``make bench`` times it against ``pandas.read_csv`` on 2 M lines.

v1: ``KTS_APP,v1,<WORKLOAD>,<i>,<epoch_ns_start>,<epoch_ns_end>,<device_ms>,<phase>``
    (wall time = end - start; tenant = lower-cased workload unless the caller names it)
v2: ``KTS_APP,v2,<workload>,<tenant>,<i>,<phase>,<intended_ns>,<start_ns>,<end_ns>,<device_ms>,<wall_ms>``
``KTS_META,v2,<json>`` (before the lines), ``KTS_END,v2,<json>`` (when the timed part ends: how many
iterations and why) and ``KTS_LOOK,v2,<json>`` (an interim look) are collected, not counted as junk.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from kts_helpers.errors import LogParseError
from kts_helpers.run.logformat import (
    APP_TAG,
    END_TAG,
    FIELDS,
    FLOAT_FIELDS,
    INT_FIELDS,
    LOOK_TAG,
    META_TAG,
    PAD_PHASE,
)

_INT = r"-?\d{1,19}"
_NUM = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NOT_A_NUMBER = r"[-+]?(?:[Nn]a[Nn]|NAN|NA|[Ii]nf(?:inity)?|INF)"  # what Arrow reads as null or inf: rejected
_NAME = r"[^,\s]+"
_FLOAT = rf"(?:{_NUM}|{_NOT_A_NUMBER})"
V1_COLS, V2_COLS = list(FIELDS["v1"]), list(FIELDS["v2"])  # the line's layout: run.logformat's


def _field_type(name: str) -> pa.DataType:
    """Names as large strings: what pandas' string columns hold, so the frame takes them without a cast."""
    return pa.int64() if name in INT_FIELDS else pa.float64() if name in FLOAT_FIELDS else pa.large_string()


def _field_re(name: str, version: str) -> str:
    """What a possible value of a field looks like (names: no comma or space; a phase may be empty)."""
    fixed = {"tag": APP_TAG, "version": version, "workload": _NAME, "tenant": _NAME, "phase": "[^,]*"}
    return fixed.get(name, _INT if name in INT_FIELDS else _FLOAT)


V1_RE, V2_RE = (f"^{','.join(_field_re(n, v) for n in FIELDS[v])}$" for v in ("v1", "v2"))
_TYPES = {name: _field_type(name) for name in V2_COLS}
_INT64_MAX = str(2**63 - 1)
COLUMNS = ["workload", "tenant", "iteration", "phase", "intended_ns", "start_ns", "end_ns", "device_ms",
           "wall_ms", "version"]

DEVICE_TOL_MS, DEVICE_TOL_REL = 0.05, 0.01  # device may exceed wall by this much (event vs host clock resolution)
SPAN_TOL_MS, SPAN_TOL_REL = 1.0, 0.01  # v2: end - start may fall short of wall by this (clock resolution, slew)
SPAN_SLACK_MS = 100.0  # ... and exceed it by this (a preemption between the epoch and the monotonic reads)
REJECT_REASONS = ("not a finite positive time", "end before start", "device time above wall time",
                  "wall time differs from end - start", "bad name or iteration", "duplicate")


@dataclass
class ParsedLog:
    """The iterations of one or more logs, plus what could not be read."""

    frame: pd.DataFrame
    malformed: int = 0  # lines that start like KTS_APP but do not parse (truncated, mangled)
    other: int = 0  # non-empty lines that are not KTS lines (tracebacks, prints)
    meta: list[dict] = field(default_factory=list)  # KTS_META records
    sources: list[str] = field(default_factory=list)
    rejected: dict[str, int] = field(default_factory=dict)  # lines that parse but cannot be true, by reason
    ends: list[dict] = field(default_factory=list)  # KTS_END records: n reached and why the timed part stopped
    looks: list[dict] = field(default_factory=list)  # KTS_LOOK records: where a tenant padded for an interim look

    @property
    def n(self) -> int:
        return len(self.frame)

    @property
    def n_rejected(self) -> int:
        return sum(self.rejected.values())

    def add(self, other: ParsedLog) -> None:
        """Fold another log's counts (not its frame) into these."""
        self.malformed += other.malformed
        self.other += other.other
        self.meta.extend(other.meta)
        self.ends.extend(other.ends)
        self.looks.extend(other.looks)
        self.sources.extend(other.sources)
        for k, v in other.rejected.items():
            self.rejected[k] = self.rejected.get(k, 0) + v


# ----------------------------------------------------------------------------- reading

def _convert(names: list[str], text: frozenset[str], check_utf8: bool) -> pacsv.ConvertOptions:
    types = {k: (pa.string() if k in text else _TYPES[k]) for k in names}
    return pacsv.ConvertOptions(column_types=types, strings_can_be_null=False, quoted_strings_can_be_null=False,
                                check_utf8=check_utf8)


def _read(data: bytes, names: list[str], *, text: frozenset[str] = frozenset(),
          aside: list[bytes] | None = None, check_utf8: bool = True) -> pa.Table:
    """Arrow's CSV reader over the whole blob; rows of another shape go to ``aside`` (when given);
    the columns in ``text`` are read as text (to be converted by ``_typed_from_strings``)."""

    def set_aside(row) -> str:
        if aside is not None:
            aside.append(row.text.encode("utf-8", "surrogateescape") if isinstance(row.text, str) else row.text)
        return "skip"

    return pacsv.read_csv(
        io.BytesIO(data),
        read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 22),
        parse_options=pacsv.ParseOptions(quote_char=False, escape_char=False, double_quote=False,
                                         invalid_row_handler=set_aside),
        convert_options=_convert(names, text, check_utf8))


def _typed_from_strings(table: pa.Table, text: frozenset[str]) -> tuple[pa.Table, pa.Array]:
    """The ``text`` columns -> typed; rows whose numbers do not convert are dropped, returned as their tags.

    The path of a file in which one value broke the typed read of its column: that column only is read as
    text and checked by a vectorised regex, never the file line by line.
    """
    ok = None
    for name in text:
        col, typ = table[name], _TYPES[name]
        if typ == pa.int64():
            good = pc.match_substring_regex(col, rf"^{_INT}$")
            digits = pc.utf8_ltrim(col, "-")
            good = pc.and_(good, pc.or_(pc.less(pc.utf8_length(digits), 19), pc.less_equal(digits, _INT64_MAX)))
        elif typ == pa.float64():
            good = pc.match_substring_regex(col, rf"^{_NUM}$")  # nan/inf never get here: Arrow reads them
        else:
            continue
        ok = good if ok is None else pc.and_(ok, good)
    if ok is None:
        return table, pa.array([], pa.large_string())
    kept = table.filter(ok)
    cols = {name: (pc.cast(kept[name], _TYPES[name]) if name in text else kept[name]) for name in kept.column_names}
    return pa.table(cols), table.filter(pc.invert(ok))["tag"].combine_chunks()


# ----------------------------------------------------------------------------- what cannot be true

_FILL = {"iteration": -1, "intended_ns": -1, "start_ns": -1, "end_ns": -1, "device_ms": np.nan, "wall_ms": np.nan}


def _without_nulls(table: pa.Table) -> pa.Table:
    """Numeric nulls (``nan``/``NA`` read by Arrow) replaced by a value that fails the checks: the row is
    rejected for the reason it always was, and int64 columns stay int64 (exact) in pandas."""
    for name, fill in _FILL.items():
        if name in table.column_names and table[name].null_count:
            table = table.set_column(table.column_names.index(name), name, pc.fill_null(table[name], fill))
    return table


def _names_ok(col: pa.ChunkedArray) -> np.ndarray:
    """Non-empty names without commas or spaces; checked once per distinct value (there are few)."""
    if len(col) and _all_equal(col, col[0].as_py()):  # the usual log: one name throughout
        values = pa.array([col[0].as_py()], col.type)
    else:
        values = pc.unique(col)
    good = values.filter(pc.match_substring_regex(values, rf"^{_NAME}$"))
    if len(good) == len(values):
        return np.ones(len(col), bool)
    return pc.is_in(col, value_set=good).to_numpy(zero_copy_only=False)


def _all_equal(col: pa.ChunkedArray, value: str) -> bool:
    eq = pc.equal(col, value)
    return eq.null_count == 0 and bool(pc.all(eq).as_py())


def _checked(table: pa.Table, version: str, tenant: str | None) -> tuple[pd.DataFrame, dict[str, int], np.ndarray]:
    """The rows that can be true, as the frame (``tenant`` names every row when given); rejected by reason;
    which rows have this tag and version.

    The checks read the frame's own numpy columns (no second copy of a 2 M-row table).
    """
    n = len(table)
    if n == 0:
        return _empty(), {}, np.ones(0, bool)
    ours = np.ones(n, bool)
    for name, want in (("tag", APP_TAG), ("version", version)):
        if not _all_equal(table[name], want):
            ours &= pc.fill_null(pc.equal(table[name], want), False).to_numpy(zero_copy_only=False)
    names = _names_ok(table["workload"])
    if "tenant" in table.column_names:
        names &= _names_ok(table["tenant"])
    df = _to_frame(_without_nulls(table), tenant)
    start, end = df["start_ns"].to_numpy(), df["end_ns"].to_numpy()
    dev, wall = df["device_ms"].to_numpy(), df["wall_ms"].to_numpy()
    epochs = start > 0
    if version == "v2":
        epochs &= df["intended_ns"].to_numpy() > 0
    with np.errstate(invalid="ignore"):  # in place where it can be: 2 M-row temporaries cost page faults
        names &= df["iteration"].to_numpy() >= 0
        epochs &= np.isfinite(dev)
        epochs &= dev > 0
        epochs &= np.isfinite(wall)
        epochs &= wall > 0
        limit = wall * (1 + DEVICE_TOL_REL)
        limit += DEVICE_TOL_MS
        checks = [("bad name or iteration", names), ("not a finite positive time", epochs),
                  ("end before start", end >= start), ("device time above wall time", dev <= limit)]
        if version == "v2":
            excess = (end - start) / 1e6
            excess -= wall
            rel = np.multiply(wall, SPAN_TOL_REL, out=limit)  # limit's bool test is taken above
            span_ok = excess <= rel + SPAN_SLACK_MS
            rel += SPAN_TOL_MS
            span_ok &= excess >= np.negative(rel, out=rel)
            checks.append(("wall time differs from end - start", span_ok))
    alive = ours.copy()
    rejected: dict[str, int] = {}
    for reason, good in checks:
        if alive.all() and good.all():
            continue
        bad = int(np.count_nonzero(alive & ~good))
        if bad:
            rejected[reason] = bad
            alive &= good
    if not alive.all():
        df = df[alive].reset_index(drop=True) if alive.any() else _empty()
    return df, rejected, ours


def duplicates(frame: pd.DataFrame) -> np.ndarray:
    """Lines a tenant already wrote: the same operation again, or an iteration number its counter had left.

    Per tenant and counter (timed / padding), in time order, an iteration's lines form one block (an llm
    iteration's decode steps too); a block whose iteration number is not above every earlier block's is a
    repeat (a restarted or concatenated log). Within a block, the same phase at the same start is a repeat.
    """
    n = len(frame)
    if n < 2:
        return np.zeros(n, bool)
    pad_mask = frame["phase"].eq(PAD_PHASE).to_numpy(bool)
    its = frame["iteration"].to_numpy(np.int64)
    if (frame["tenant"].nunique() == 1 and np.all(np.diff(its[~pad_mask]) > 0)
            and np.all(np.diff(its[pad_mask]) > 0)):
        return np.zeros(n, bool)  # the usual log: one tenant, each counter rising line by line, nothing to sort
    tenant = pd.factorize(frame["tenant"])[0].astype(np.int64)
    phase = pd.factorize(frame["phase"])[0]
    group = 2 * tenant + pad_mask.astype(np.int64)
    start = frame["start_ns"].to_numpy(np.int64)
    order = np.argsort(group, kind="stable")
    g, s = group[order], start[order]
    if np.any((np.diff(s) < 0) & (g[1:] == g[:-1])):  # not in time order within a counter: sort by start too
        order = np.lexsort((start, group))
        g, s = group[order], start[order]
    i = frame["iteration"].to_numpy(np.int64)[order]
    ph = phase[order]
    same_g = np.r_[False, g[1:] == g[:-1]]
    same_it = np.r_[False, i[1:] == i[:-1]] & same_g
    repeat = same_it & np.r_[False, (s[1:] == s[:-1]) & (ph[1:] == ph[:-1])]
    heads = np.flatnonzero(~same_it)  # first line of each block
    key = i[heads] + g[heads] * (1 << 40)  # iterations rise within a counter; the offset restarts the max per counter
    before = np.maximum.accumulate(np.r_[np.iinfo(np.int64).min, key[:-1]])
    stale = (key <= before) & np.r_[False, g[heads][1:] == g[heads][:-1]]
    block = np.cumsum(~same_it) - 1
    dup = np.zeros(n, bool)
    dup[order] = repeat | stale[block]
    return dup


# ----------------------------------------------------------------------------- the two paths

def _sniff_version(data: bytes) -> str | None:
    head = f"{APP_TAG},v".encode()
    i = data.find(head)
    if i < 0:
        return None
    version = data[i + len(head) - 1: i + len(head) + 1].decode("ascii", "replace")
    return version if version in FIELDS else None


def _split_tags(tags: pa.Array | pa.ChunkedArray) -> tuple[int, int]:
    """(malformed, other) among rows set apart by their tag: KTS_APP-like ones are malformed, the rest junk."""
    app = pc.sum(pc.starts_with(tags, APP_TAG)).as_py() or 0
    return int(app), len(tags) - int(app)


def _fast(data: bytes, version: str, tenant: str | None) -> tuple[pd.DataFrame, dict[str, int], int, int,
                                                                 list[bytes]] | None:
    """The whole file at once: (valid rows, rejected, malformed, other, lines of another shape); None: no CSV."""
    names = V2_COLS if version == "v2" else V1_COLS
    text: frozenset[str] = frozenset()
    for _ in names:  # a value that does not convert: read its column as text, convert what converts
        aside: list[bytes] = []
        try:
            table = _read(data, names, text=text, aside=aside, check_utf8=False)  # the caller checked: ASCII
            break
        except pa.ArrowInvalid as exc:
            m = re.search(r"CSV column #(\d+)", str(exc))
            if m is None or names[int(m.group(1))] in text:
                return None
            text |= {names[int(m.group(1))]}
        except UnicodeDecodeError:
            return None
    else:
        return None
    table, dropped = _typed_from_strings(table, text) if text else (table, pa.array([], pa.large_string()))
    frame, rejected, ours = _checked(table, version, tenant)
    others = table["tag"].filter(pa.array(~ours)).chunks if not ours.all() else []
    malformed, other = _split_tags(pa.chunked_array([dropped, *others], pa.large_string()))
    return frame, rejected, malformed, other, aside


def _robust(data: bytes) -> ParsedLog:
    """Line by line (vectorised regexes): keeps every valid line, counts the rest."""
    lines = pa.array(data.split(b"\n"), pa.binary())
    if pc.any(pc.ends_with(lines, "\r")).as_py():
        lines = pa.array([b[:-1] if b.endswith(b"\r") else b for b in lines.to_pylist()], pa.binary())
    nonempty = pc.greater(pc.binary_length(lines), 0)
    is_app = pc.starts_with(lines, f"{APP_TAG},")
    is_meta = pc.starts_with(lines, f"{META_TAG},")
    is_end = pc.starts_with(lines, f"{END_TAG},")
    is_look = pc.starts_with(lines, f"{LOOK_TAG},")
    frames, rejected = [], {}
    valid = 0
    for version, names, regex in (("v2", V2_COLS, V2_RE), ("v1", V1_COLS, V1_RE)):
        chosen = lines.filter(pc.match_substring_regex(lines, regex))
        if not len(chosen):
            continue
        table, refused = _read_lines(chosen.to_pylist(), names)
        valid += len(chosen) - refused
        if table is not None:
            frame, rej, _ = _checked(table, version, None)
            for k, v in rej.items():
                rejected[k] = rejected.get(k, 0) + v
            frames.append(frame)
    n_app = pc.sum(is_app).as_py() or 0
    malformed = n_app - valid
    other = (pc.sum(nonempty).as_py() or 0) - n_app - sum(pc.sum(m).as_py() or 0 for m in (is_meta, is_end, is_look))
    records: dict[str, list[dict]] = {"meta": [], "end": [], "look": []}
    for kind, mask in (("meta", is_meta), ("end", is_end), ("look", is_look)):
        for raw in lines.filter(mask).to_pylist():
            try:
                records[kind].append(json.loads(raw.split(b",", 2)[2]))
            except (ValueError, IndexError):
                malformed += 1
    frame = pd.concat(frames, ignore_index=True) if frames else _empty()
    return ParsedLog(frame=frame, malformed=int(malformed), other=int(other), meta=records["meta"],
                     rejected=rejected, ends=records["end"], looks=records["look"])


def _read_lines(lines: list[bytes], names: list[str]) -> tuple[pa.Table | None, int]:
    """Read lines that match the format; drop (and count) those Arrow still refuses (a 19-digit value past
    int64, undecodable bytes inside a name)."""
    try:
        return _read(b"\n".join(lines) + b"\n", names), 0
    except (pa.ArrowInvalid, UnicodeDecodeError):
        keep = [ln for ln in lines if _convertible(ln, names)]
        table = _read(b"\n".join(keep) + b"\n", names) if keep else None
        return table, len(lines) - len(keep)


def _convertible(line: bytes, names: list[str]) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    fields = line.split(b",")
    return all(abs(int(v)) <= 2**63 - 1 for v, n in zip(fields, names, strict=True) if _TYPES[n] == pa.int64())


def parse_bytes(data: bytes, *, source: str = "<bytes>", tenant: str | None = None) -> ParsedLog:
    """Parse one log's bytes. Never raises on junk or on impossible values; returns an empty frame if
    nothing is valid. Clean ASCII logs take Arrow's typed reader; undecodable bytes the line-by-line path."""
    version = _sniff_version(data)
    fast = _fast(data, version, tenant) if version is not None and data.isascii() else None
    if fast is not None:
        frame, rejected, malformed, other, aside = fast
        rest = _robust(b"\n".join(aside)) if aside else ParsedLog(frame=_empty())
        frames = [f for f in (frame, _with_tenant(rest.frame, tenant)) if len(f)]
        out = ParsedLog(frame=pd.concat(frames, ignore_index=True) if len(frames) > 1 else
                        (frames[0] if frames else _empty()), malformed=rest.malformed + malformed,
                        other=rest.other + other, meta=rest.meta, ends=rest.ends, looks=rest.looks,
                        rejected=dict(rejected))
        for k, v in rest.rejected.items():
            out.rejected[k] = out.rejected.get(k, 0) + v
    else:
        out = _robust(data)
        out.frame = _with_tenant(out.frame, tenant)
    out.sources = [source]
    dup = duplicates(out.frame)
    if dup.any():
        out.frame = out.frame[~dup].reset_index(drop=True)
        out.rejected["duplicate"] = out.rejected.get("duplicate", 0) + int(dup.sum())
    return out


def _with_tenant(frame: pd.DataFrame, tenant: str | None) -> pd.DataFrame:
    if tenant and len(frame):
        frame = frame.copy()
        frame["tenant"] = tenant
    return frame


def _to_frame(table: pa.Table, tenant: str | None) -> pd.DataFrame:
    df = table.drop_columns(["tag"]).to_pandas()
    if df.empty:
        return _empty()
    if "tenant" not in df:  # v1
        df["workload"] = df["workload"].str.lower()
        df["tenant"] = tenant or df["workload"]
        df["intended_ns"] = df["start_ns"]
        df["wall_ms"] = (df["end_ns"] - df["start_ns"]).to_numpy(np.int64) / 1e6
    elif tenant:
        df["tenant"] = tenant
    return df[COLUMNS]


def _empty() -> pd.DataFrame:
    """A frame of the parsed columns and their types, no rows: a copy of one built once (building it took a few ms,
    and every log's KTS_META lines are parsed on their own: a run of 300 logs spent a second here)."""
    return _EMPTY.copy()


def _build_empty() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series(dtype="int64") for c in COLUMNS})
    for c in ("workload", "tenant", "phase", "version"):
        df[c] = df[c].astype(object)
    for c in ("device_ms", "wall_ms"):
        df[c] = df[c].astype("float64")
    return df


_EMPTY = _build_empty()


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
        out.add(parsed)
    if parts:
        out.frame = pd.concat(parts, ignore_index=True)
    if require and out.n == 0:
        names = ", ".join(str(p) for p in paths) or "(no files)"
        raise LogParseError(f"no valid KTS_APP lines in {names}")
    return out
