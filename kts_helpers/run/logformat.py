"""The log line: the one contract between a worker and everything that reads its stdout.

Every module that writes or reads ``KTS_APP``/``KTS_META``/``KTS_END`` lines takes the layout from here
(tags, versions, field names and positions), so a change to the line is made once. The worker
(``workers/kts_worker.py``) keeps its own copy because it runs on a bare host; a test round-trips lines
between the two. Standard library only (the runner works on a bare GPU host).

v1 (the article's tool): ``KTS_APP,v1,<WORKLOAD>,<i>,<epoch_ns_start>,<epoch_ns_end>,<device_ms>,<phase>``
v2 (ours): ``KTS_APP,v2,<workload>,<tenant>,<i>,<phase>,<intended_ns>,<start_ns>,<end_ns>,<device_ms>,<wall_ms>``
``KTS_META,v2,<json>`` precedes the lines; ``KTS_END,v2,<json>`` says when and why the timed part ended;
``KTS_LOOK,v2,<json>`` marks an interim look (``{"tenant", "n"}``): the tenant pads until the orchestrator answers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

APP_TAG, META_TAG, END_TAG, LOOK_TAG = "KTS_APP", "KTS_META", "KTS_END", "KTS_LOOK"
RECORD_TAGS = (META_TAG, END_TAG, LOOK_TAG)
VERSION = "v2"  # what the worker writes
V1_FIELDS = ("tag", "version", "workload", "iteration", "start_ns", "end_ns", "device_ms", "phase")
V2_FIELDS = ("tag", "version", "workload", "tenant", "iteration", "phase", "intended_ns", "start_ns", "end_ns",
             "device_ms", "wall_ms")
FIELDS = {"v1": V1_FIELDS, "v2": V2_FIELDS}
INT_FIELDS = frozenset({"iteration", "intended_ns", "start_ns", "end_ns"})  # epoch ns: int64, never a float
FLOAT_FIELDS = frozenset({"device_ms", "wall_ms"})
PAD_PHASE = "pad"  # padding: the same operation at the same cadence, its own counter, never a statistic


def position(name: str, version: str = VERSION) -> int:
    """Where a field sits in a line of this version (the tag is field 0)."""
    return FIELDS[version].index(name)


@dataclass(frozen=True)
class AppLine:
    """One timed operation (a ``KTS_APP`` line); a v1 line gets v2's fields the way the parser reads it."""

    workload: str
    tenant: str
    iteration: int
    phase: str
    intended_ns: int
    start_ns: int
    end_ns: int
    device_ms: float
    wall_ms: float
    version: str = VERSION

    @property
    def padding(self) -> bool:
        return self.phase == PAD_PHASE


@dataclass(frozen=True)
class LogRecord:
    """A ``KTS_META`` or ``KTS_END`` record: its tag and its JSON object."""

    tag: str
    data: dict[str, Any]
    version: str = VERSION


def format_line(line: AppLine) -> str:
    """The v2 ``KTS_APP`` line (no newline), times with the worker's six decimals."""
    return (f"{APP_TAG},{VERSION},{line.workload},{line.tenant},{line.iteration},{line.phase},{line.intended_ns},"
            f"{line.start_ns},{line.end_ns},{line.device_ms:.6f},{line.wall_ms:.6f}")


def format_record(tag: str, data: dict[str, Any]) -> str:
    """A ``KTS_META``/``KTS_END`` line (no newline): compact JSON, as the worker writes it."""
    if tag not in RECORD_TAGS:
        raise ValueError(f"{tag!r} is not a record tag ({', '.join(RECORD_TAGS)})")
    return f"{tag},{VERSION},{json.dumps(data, separators=(',', ':'))}"


def parse_line(raw: str | bytes) -> AppLine | LogRecord | None:
    """One line (str or bytes, with or without its line ending) -> its typed record; None when it is not one.

    Line by line, for small logs read as they grow; whole files go to ``analyse.logparse``, which takes
    the same layout from here and also rejects lines that parse but cannot be true.
    """
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.rstrip("\r\n")
    tag, _, rest = text.partition(",")
    if tag in RECORD_TAGS:
        version, _, body = rest.partition(",")
        try:
            data = json.loads(body)
        except ValueError:
            return None
        return LogRecord(tag, data, version) if isinstance(data, dict) else None
    if tag != APP_TAG:
        return None
    f = text.split(",")
    names = FIELDS.get(f[1]) if len(f) > 1 else None
    if names is None or len(f) != len(names):
        return None
    v = dict(zip(names, f, strict=True))
    try:
        ints = {k: int(v[k]) for k in INT_FIELDS if k in v}
        floats = {k: float(v[k]) for k in FLOAT_FIELDS if k in v}
    except ValueError:
        return None
    if f[1] == "v1":
        return AppLine(workload=v["workload"].lower(), tenant=v["workload"].lower(), iteration=ints["iteration"],
                       phase=v["phase"], intended_ns=ints["start_ns"], start_ns=ints["start_ns"],
                       end_ns=ints["end_ns"], device_ms=floats["device_ms"],
                       wall_ms=(ints["end_ns"] - ints["start_ns"]) / 1e6, version="v1")
    return AppLine(workload=v["workload"], tenant=v["tenant"], phase=v["phase"], version=f[1], **ints, **floats)
