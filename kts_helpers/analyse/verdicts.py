"""A run's summary table with its verdicts, read the one way the report, the README tables and the index read it.

Why its own module: three callers (``present.notebook``, ``present.pipeline``, ``present.reference``) summarised a
run and added intervals and verdicts each with its own options; a run's level (``blockseq.run_confidence``: the
look that stopped a ``blocks=auto`` run), whether its host is the contended device (a CPU run never adjusts for the
host's speed) and the mechanism behind a device-time speed-up (``warmgpu``) must be the same in all three.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from kts_helpers.analyse import warmgpu
from kts_helpers.analyse.blockseq import run_confidence
from kts_helpers.analyse.intervals import add_all_intervals
from kts_helpers.analyse.load import RunData
from kts_helpers.analyse.summary import summarize_run
from kts_helpers.analyse.verdict import INCONCLUSIVE, faster_readings


def verdict_table(data: RunData, metrics: tuple[str, ...] = ("wall", "device"), *, confidence: float = 0.95,
                  **options: Any) -> pd.DataFrame:
    """``summary.summarize_run`` with every interval and verdict (``intervals.add_all_intervals``) at the run's
    level, the host's speed a covariate only off a CPU, and a device-time speed-up that a warm GPU explains saying
    so in its words (``warmgpu.mechanism``)."""
    table = add_all_intervals(summarize_run(data, metrics), data.iterations, metrics,
                              confidence=run_confidence(data.manifest, confidence), on_host=not data.on_gpu,
                              **options)
    return name_mechanisms(table, data)


def name_mechanisms(table: pd.DataFrame, data: RunData) -> pd.DataFrame:
    """A device-time row that reads faster -- or whose faster side made it inconclusive -- gets its mechanism where
    the run shows one: a neighbour keeping the GPU warm (``warmgpu``)."""
    rows = table[(table["kind"] == "shared") & (table["metric"] == "device")]
    faster = rows[rows["reading"].isin(faster_readings()) | ((rows["reading"] == INCONCLUSIVE)
                                                             & rows["reading_detail"].astype(str).str.contains(
                                                                 "faster by", regex=False))]
    if faster.empty:
        return table
    splits = warmgpu.split(data)
    out = table.copy()
    for i, r in faster.iterrows():
        why = warmgpu.mechanism(splits, r["tenant"], r["phase"], r["sharing"])
        if why:
            out.at[i, "reading_detail"] = f"{r['reading_detail']}; its mechanism: {why}"
    return out
