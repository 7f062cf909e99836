"""The lesson's table cache (``teaching.memo``): the same table as computing it, and never a stale one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kts_helpers import diskcache
from kts_helpers.teaching import memo, reference

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KTS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _runs(tmp: Path) -> list[Path]:
    out = []
    for name in ("run-a", "run-b"):
        d = tmp / name
        (d / "logs" / "shared").mkdir(parents=True)
        (d / "manifest.json").write_text(json.dumps({"run_id": name}))
        (d / "logs" / "shared" / "fft.log").write_text("KTS_APP,v2,fft,fft,0,main,1,2,3,0.5,0.6\n")
        out.append(d)
    return out


class Counting:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> pd.DataFrame:
        self.calls += 1
        return pd.DataFrame({"reference": ["run-a", "run-b"], "df": [1.0 / 3.0, np.nan], "n": [300, 2000]})


def test_a_stored_table_is_the_computed_one_to_the_bit(cache: Path, tmp_path: Path) -> None:
    runs, compute = _runs(tmp_path), Counting()
    first = memo.table("t", runs, compute, n_resamples=100)
    again = memo.table("t", runs, compute, n_resamples=100)
    assert compute.calls == 1 and len(list(cache.glob("t-*.parquet"))) == 1
    pd.testing.assert_frame_equal(first, again, check_exact=True)
    assert again["df"].iloc[0] == 1.0 / 3.0


@pytest.mark.parametrize("change", ["log", "manifest", "new file", "arguments", "source"])
def test_any_changed_input_is_computed_again(change: str, cache: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    runs, compute = _runs(tmp_path), Counting()
    memo.table("t", runs, compute, n_resamples=100)
    args = {"n_resamples": 100}
    if change == "log":
        with open(runs[1] / "logs" / "shared" / "fft.log", "a") as f:
            f.write("KTS_APP,v2,fft,fft,1,main,1,2,3,0.5,0.6\n")
    elif change == "manifest":
        (runs[0] / "manifest.json").write_text('{"run_id": "run-a", "status": "failed"}')
    elif change == "new file":
        (runs[0] / "logs" / "shared" / "gemm.log").write_text("")
    elif change == "arguments":
        args = {"n_resamples": 1000}
    else:  # the kit's own source: a copy of the package with one byte more
        pkg = tmp_path / "pkg"
        for f in diskcache.PACKAGE.rglob("*.py"):
            (pkg / f.relative_to(diskcache.PACKAGE)).parent.mkdir(parents=True, exist_ok=True)
            (pkg / f.relative_to(diskcache.PACKAGE)).write_bytes(f.read_bytes())
        monkeypatch.setattr(diskcache, "PACKAGE", pkg)
        memo.table("t", runs, compute, n_resamples=100)  # the copy is the same source: the same key
        assert compute.calls == 1
        (pkg / "analyse" / "verdict.py").write_bytes((pkg / "analyse" / "verdict.py").read_bytes() + b"\n")
    memo.table("t", runs, compute, **args)
    assert compute.calls == 2


def test_a_damaged_or_unwritable_cache_only_means_computing(cache: Path, tmp_path: Path) -> None:
    runs, compute = _runs(tmp_path), Counting()
    memo.table("t", runs, compute)
    (stored,) = cache.glob("t-*.parquet")
    stored.write_bytes(stored.read_bytes()[:40])  # cut short
    again = memo.table("t", runs, compute)
    assert compute.calls == 2 and len(again) == 2
    memo.table("t", runs, compute)
    assert compute.calls == 2  # written again, whole
    os.environ["KTS_CACHE_DIR"] = str(tmp_path / "a-file")
    (tmp_path / "a-file").write_text("not a folder")
    assert len(memo.table("t", runs, compute)) == 2 and compute.calls == 3


def test_the_lessons_modes_from_the_cache_are_the_report_comparisons(cache: Path) -> None:
    """The real table: computed directly, then through the cache twice (stored, then read back)."""
    run = [REPO / "data" / "reference" / "h200-2026-11-30-mps-limited"]
    direct = reference._sharing_modes(run, 100)
    stored = reference.sharing_modes(run, n_resamples=100)
    read = reference.sharing_modes(run, n_resamples=100)
    assert len(list(cache.glob("sharing-modes-*.parquet"))) == 1 and len(direct)
    pd.testing.assert_frame_equal(direct, stored, check_exact=True)
    pd.testing.assert_frame_equal(direct, read, check_exact=True)


def test_the_gpu_model_is_stored_as_read_and_read_again_when_a_probe_byte_changes(cache: Path, tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch
                                                                                  ) -> None:
    """``plan.engine.gpu_model_from_probe`` keeps the model on disk (every report, lesson and ``kts plan`` of a GPU
    reads the same committed probe in a fresh process): the stored model is the read one, field for field and type
    for type, its paths are the caller's, and a probe with one byte changed is read again."""
    import shutil

    from kts_helpers.plan import engine
    from kts_helpers.teaching.synthetic import write_sim_probe

    probe = write_sim_probe(tmp_path / "probe", 2.0, 0.1, seed=1)
    reads = []
    real = engine.read_probe
    monkeypatch.setattr(engine, "read_probe", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    engine.gpu_model_from_probe.cache_clear()
    first = engine.gpu_model_from_probe(str(probe))
    engine.gpu_model_from_probe.cache_clear()  # a fresh process: only the disk remembers
    copy = shutil.copytree(probe, tmp_path / "elsewhere" / "probe")
    again = engine.gpu_model_from_probe(str(copy))
    assert len(reads) == 1 and len(list(cache.glob("gpu-model-*.json"))) == 1
    assert again.source == str(copy) and again == engine.replace(first, source=str(copy))
    for a, b in ((first.quantum_ms, again.quantum_ms), (first.switch_ms, again.switch_ms)):
        assert [type(x) for x in (a.value, a.lo, a.hi)] == [type(x) for x in (b.value, b.lo, b.hi)] == [np.float64] * 3
    log = next(copy.glob("logs/shared/*.log"))
    log.write_bytes(log.read_bytes().replace(b",", b",", 1) + b"\n")  # one byte more
    engine.gpu_model_from_probe.cache_clear()
    engine.gpu_model_from_probe(str(copy))
    engine.gpu_model_from_probe.cache_clear()
    assert len(reads) == 2 and len(list(cache.glob("gpu-model-*.json"))) == 2
    (cache / "gpu-model-x.json").write_text("{")  # a store cut short is not a model: nothing fails
    assert engine._stored_model(cache / "gpu-model-x.json", str(probe), "") is None


def _compute_slowly(runs: list[Path], calls: Path, out: Path) -> None:
    """One process of the test below: the table through the cache, its compute counted in ``calls``."""
    import time

    def compute() -> pd.DataFrame:
        with open(calls, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(1.5)  # long enough for the other process to miss the cache meanwhile
        return pd.DataFrame({"reference": ["run-a"], "df": [1.0 / 3.0]})

    memo.table("t", runs, compute, n_resamples=100).to_json(out)


def test_two_processes_that_miss_at_once_compute_once(cache: Path, tmp_path: Path) -> None:
    """The second process waits for the first's table and reads it (``diskcache.stored_or_computed``): on two busy test
    workers the lesson's renders each computed the MPS table, tens of seconds each. Fails without the lock."""
    import multiprocessing

    runs, calls = _runs(tmp_path), tmp_path / "calls"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_compute_slowly, args=(runs, calls, tmp_path / f"out-{i}.json")) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(calls.read_text().splitlines()) == 1
    assert (tmp_path / "out-0.json").read_text() == (tmp_path / "out-1.json").read_text()
