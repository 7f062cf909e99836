"""Each tenant's alone profile as the report shows it (``analyse.profiles``), and the warnings when the profile
may have left its mark on the timed iterations that followed it in the same process.

The faults these tests exist to catch: the busy share taken over the profiled wall instead of the timed one; a
phase's numbers put on another phase; a profile that left CUPTI attached passing unnamed; a CPU profile (no CUPTI)
or a noisy residue warned about.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kts_helpers.analyse import profiles

GPU_PROFILE = {
    "device": "cuda", "cost_s": 7.5, "cupti_teardown": True, "memory": {"peak_mib": 4338.0},
    "residue": {"prefill": 1.01, "decode": 0.99},
    "phases": {"prefill": {"kernels_per_op": 663, "busy_ms": 3.76, "sm_share": 0.91, "busy_share": 0.09},
               "decode": {"kernels_per_op": 679, "busy_ms": 1.91, "sm_share": 0.44, "busy_share": 0.05,
                          "host_syncs": 2.0}},
}


def test_rows_put_each_phase_against_its_timed_wall():
    walls = {"prefill": np.array([20.0, 21.0, 22.0]), "decode": np.full(8, 19.1)}
    rows = {r["phase"]: r for r in profiles.profile_rows(GPU_PROFILE, walls)}
    assert rows["prefill"]["wall_p50_ms"] == 21.0 and rows["prefill"]["n"] == 3
    assert rows["prefill"]["kernels_per_op"] == 663 and rows["decode"]["kernels_per_op"] == 679
    # the kernels' time over the *timed* p50, not the profile's own busy share (its wall ran under CUPTI)
    assert rows["prefill"]["busy_share"] == pytest.approx(3.76 / 21.0)
    assert rows["decode"]["busy_share"] == pytest.approx(1.91 / 19.1)
    assert rows["decode"]["sm_share"] == 0.44 and rows["decode"]["residue"] == 0.99
    assert rows["decode"]["cupti_detached"] is True and rows["decode"]["peak_mib"] == 4338.0
    # the host's waits mid-op (profile version 3): the phase's own; a profile before the count has none (NaN, not 0)
    assert rows["decode"]["host_syncs"] == 2.0 and np.isnan(rows["prefill"]["host_syncs"])
    # a phase the profile never saw keeps its timed numbers and no profile numbers
    other = profiles.profile_rows(GPU_PROFILE, {"embed": np.array([1.0])})[0]
    assert other["wall_p50_ms"] == 1.0 and np.isnan(other["kernels_per_op"]) and np.isnan(other["residue"])
    cpu = profiles.profile_rows({**GPU_PROFILE, "device": "cpu", "cupti_teardown": None}, walls)[0]
    assert cpu["cupti_detached"] is None


def _table(**prof):
    meta = pd.DataFrame([{"scenario": "baseline-llama-decode-r1", "tenant": "llama-decode",
                          "profile": {**GPU_PROFILE, **prof}},
                         {"scenario": "shared-r1", "tenant": "llama-decode", "profile": None}])
    it = pd.DataFrame({"scenario": ["baseline-llama-decode-r1"] * 3 + ["shared-r1"],
                       "tenant": ["llama-decode"] * 4, "kind": ["baseline"] * 3 + ["shared"],
                       "phase": ["prefill", "decode", "pad", "decode"], "wall_ms": [21.0, 19.0, 1.0, 5.0]})
    return profiles.profiles_table(meta, it)


def test_the_table_reads_alone_blocks_only_and_names_what_the_profile_left():
    t = _table()
    assert list(t["phase"]) == ["prefill", "decode"]  # no pad line, no shared block
    assert t.loc[t["phase"] == "decode", "wall_p50_ms"].item() == 19.0
    assert profiles.warnings(t) == []  # detached, and no slower after than before
    assert profiles.warnings(_table(residue={"prefill": 1.02, "decode": 1.83})) == []  # the residue is shown only
    attached = profiles.warnings(_table(cupti_teardown=False, residue={}))
    assert len(attached) == 1 and "left CUPTI attached in 1 alone block(s) (llama-decode (baseline-llama-decode-r1))" \
        in attached[0]
    assert profiles.warnings(_table(device="cpu", cupti_teardown=None, residue={})) == []


def test_blocks_left_attached_are_named_in_one_sentence():
    lines = profiles.profile_warnings([("bert", "baseline-bert-r1", False), ("vit", "baseline-vit-r1", False),
                                       ("vit", "baseline-vit-r2", True), ("cpu", "baseline-cpu", None)])
    assert len(lines) == 1
    assert "in 2 alone block(s) (bert (baseline-bert-r1), vit (baseline-vit-r1))" in lines[0]
    assert profiles.profile_warnings([("vit", "baseline-vit-r2", True), ("cpu", "baseline-cpu", None)]) == []
