"""``kts summarize`` on article-style v1 logs: exact numbers, trimming, clipping, clean errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from kts_helpers.cli import main

REPO = Path(__file__).resolve().parent.parent
V1 = Path(__file__).resolve().parent / "fixtures" / "v1"
BASE = [V1 / "baseline-fft.log", V1 / "baseline-gemm.log"]
SHARED = [V1 / "shared-fft.log", V1 / "shared-gemm.log"]
KEYS = {"workload", "kind", "metric", "n", "p50_ms", "p95_ms", "p99_ms", "mean_ms", "jitter",
        "throughput_per_s"}


def _read(path):
    """Per workload: device ms, start ns, end ns of every KTS_APP line, parsed from the text."""
    rows = [ln.split(",") for ln in path.read_text().splitlines() if ln.startswith("KTS_APP,")]
    out = {}
    for r in rows:
        w = out.setdefault(r[2].lower(), {"device": [], "start": [], "end": []})
        w["device"].append(float(r[6]))
        w["start"].append(int(r[4]))
        w["end"].append(int(r[5]))
    return {k: {c: np.array(v, dtype=np.int64 if c != "device" else np.float64) for c, v in d.items()}
            for k, d in out.items()}


def _values(d, metric):
    return d["device"] if metric == "device" else (d["end"] - d["start"]) / 1e6


def _summarize(capsys, *args):
    code = main(["summarize", *args])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _json(capsys, *args):
    code, out, err = _summarize(capsys, *args, "--format", "json")
    assert code == 0, err
    return {(r["kind"], r["workload"]): r for r in json.loads(out)}, err


def _expect(row, x):
    p50, p95, p99 = np.percentile(x, [50, 95, 99])
    assert row["n"] == len(x)
    assert (row["p50_ms"], row["p95_ms"], row["p99_ms"]) == (p50, p95, p99)
    assert row["mean_ms"] == np.mean(x)
    assert row["jitter"] == p99 / p50
    assert row["throughput_per_s"] == 1000.0 / np.mean(x)


def _args(*extra):
    return ["--baseline", *map(str, BASE), "--shared", *map(str, SHARED), *extra]


def test_json_keys_and_df_only_on_shared(capsys):
    rows, _ = _json(capsys, *_args())
    assert set(rows) == {("baseline", "fft"), ("baseline", "gemm"), ("shared", "fft"), ("shared", "gemm")}
    for (scen, _w), row in rows.items():
        assert set(row) >= KEYS
        assert row["metric"] == "device"
        assert ("df" in row) == (scen == "shared")


@pytest.mark.parametrize("metric", ["device", "wall"])
def test_v1_no_clip_reproduces_numpy_exactly(capsys, metric):
    rows, _ = _json(capsys, *_args("--metric", metric, "--no-clip"))
    for scen, files in (("baseline", BASE), ("shared", SHARED)):
        for f in files:
            for w, d in _read(f).items():
                _expect(rows[(scen, w)], _values(d, metric))
    for w in ("fft", "gemm"):
        assert rows[("shared", w)]["df"] == rows[("shared", w)]["p99_ms"] / rows[("baseline", w)]["p99_ms"]
        assert rows[("shared", w)]["df"] > 1  # the fixtures' shared runs are slower


def test_trim_drops_first_n_per_workload_per_file(capsys):
    n = 7
    rows, _ = _json(capsys, *_args("--no-clip", "--trim", str(n)))
    for scen, files in (("baseline", BASE), ("shared", SHARED)):
        for f in files:
            for w, d in _read(f).items():
                _expect(rows[(scen, w)], d["device"][n:])


def test_clipping_keeps_only_the_overlap_window(capsys):
    shared = {w: d for f in SHARED for w, d in _read(f).items()}
    lo = max(int(d["start"].min()) for d in shared.values())  # the later tenant's first start
    hi = min(int(d["end"].max()) for d in shared.values())  # the earlier tenant's last end
    clipped, _ = _json(capsys, *_args())
    kept, _ = _json(capsys, *_args("--no-clip"))
    for w, d in shared.items():
        inside = (d["start"] >= lo) & (d["end"] <= hi)
        assert 0 < inside.sum() < len(inside)  # the fixtures really have a ragged start/end
        _expect(clipped[("shared", w)], d["device"][inside])
        _expect(kept[("shared", w)], d["device"])
    # the FFT started first: its early iterations are the ones dropped
    fft = shared["fft"]
    assert not ((fft["start"] >= lo) & (fft["end"] <= hi))[0]
    for w in ("fft", "gemm"):  # baselines are never clipped
        assert clipped[("baseline", w)] == kept[("baseline", w)]


def test_table_format(capsys):
    code, out, err = _summarize(capsys, *_args("--format", "table"))
    assert code == 0, err
    lines = out.strip().splitlines()
    header = lines[0].split()
    for col in ("workload", "tenant", "kind", "metric", "n", "p50_ms", "p95_ms", "p99_ms", "df"):
        assert col in header
    assert "phase" not in header  # one phase only: the column is dropped
    assert len(lines) == 5
    assert sum(ln.split()[0] == "fft" for ln in lines[1:]) == 2


def test_junk_counts_reported_on_stderr(capsys, make_log):
    good = [make_log.v1("FFT", i, 10**18 + i * 10**7, 10**18 + i * 10**7 + 3 * 10**6, 1.0 + i / 10) for i in range(20)]
    log = make_log("junky.log", good[:10] + ["Traceback (most recent call last):", good[10][:30],
                                             b"\xff\xfe", good[11][:-20] + ",x"] + good[10:] + ["bye"])
    code, out, err = _summarize(capsys, "--baseline", str(log), "--format", "json")
    assert code == 0
    assert err.strip() == "kts: note: skipped 2 malformed KTS_APP line(s) and 3 other line(s)"
    assert json.loads(out)[0]["n"] == 20


def test_impossible_lines_are_counted_and_never_abort_the_intervals(capsys, make_log):
    good = [make_log.v2("fft", "f", i, 10**18 + i * 10**7, 10**18 + i * 10**7 + 2 * 10**6,
                        1.0 + (i * 37 % 400) / 1000, 2.0) for i in range(400)]  # no trend: an interval exists
    bad = [make_log.v2("fft", "f", 900, 10**18 + 5 * 10**9, 10**18 + 5 * 10**9 + 2 * 10**6, 1.0, float("inf")),
           make_log.v2("fft", "f", 901, 10**18 + 6 * 10**9, 10**18 + 6 * 10**9 + 2 * 10**6, -1.0, 2.0)]
    log = make_log("bad.log", good[:200] + bad + good[200:])
    code, out, err = _summarize(capsys, "--baseline", str(log), "--format", "json", "--ci", "--resamples", "200")
    assert code == 0, err
    assert err.strip() == ("kts: note: skipped 0 malformed KTS_APP line(s), 2 impossible one(s) "
                           "(2 not a finite positive time) and 0 other line(s)")
    row = json.loads(out)[0]
    assert row["n"] == 400 and row["p99_ci"][0] <= row["p99_ms"]


def test_clean_logs_print_no_note(capsys, make_log):
    log = make_log("clean.log", [make_log.v2("gemm", "g", i, 10**18 + i * 10**7, 10**18 + i * 10**7 + 10**6,
                                             1.0, 1.0) for i in range(5)])
    code, _, err = _summarize(capsys, "--baseline", str(log))
    assert code == 0 and err == ""


def _one_line_error(code, out, err):
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kts: error: ")
    assert "Traceback" not in err
    return lines[0]


def test_empty_and_junk_only_inputs(capsys, make_log):
    empty = make_log("empty.log", [])
    junk = make_log("junk.log", ["hello", b"\xff\xfe\x00", "KTS_APP,v1,FFT,1,2"])
    msg = _one_line_error(*_summarize(capsys, "--baseline", str(empty)))
    assert "no valid KTS_APP lines" in msg and "empty.log" in msg
    msg = _one_line_error(*_summarize(capsys, "--baseline", str(junk), "--shared", str(empty)))
    assert "junk.log" in msg
    _one_line_error(*_summarize(capsys, "--shared", str(junk)))


def test_missing_file_and_no_files(capsys, tmp_path):
    msg = _one_line_error(*_summarize(capsys, "--baseline", str(tmp_path / "missing.log")))
    assert "missing.log" in msg and "does not exist" in msg
    msg = _one_line_error(*_summarize(capsys, "--baseline", *map(str, BASE), "--shared", str(tmp_path)))
    assert "directory" in msg
    _one_line_error(*_summarize(capsys))


def test_negative_trim(capsys):
    _one_line_error(*_summarize(capsys, *_args("--trim", "-1")))


def test_python_m_kts_helpers_subprocess(capsys):
    res = subprocess.run([sys.executable, "-m", "kts_helpers", "summarize", *_args("--format", "json")],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 0, res.stderr
    in_process, _ = _json(capsys, *_args())
    assert {(r["kind"], r["workload"]): r for r in json.loads(res.stdout)} == in_process
    assert res.stderr.strip() == "kts: note: skipped 0 malformed KTS_APP line(s) and 4 other line(s)"
    bad = subprocess.run([sys.executable, "-m", "kts_helpers", "summarize", "--baseline", "/nonexistent/x.log"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("kts: error: ") and bad.stderr.count("\n") == 1


def _options(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from ((f"{name} {opt}", help_) for opt, help_ in _options(sub))
        elif not isinstance(action, argparse._HelpAction):
            yield "/".join(action.option_strings) or action.dest, action.help


def test_every_option_has_help_text():
    from kts_helpers.cli import build_parser

    options = dict(_options(build_parser()))
    assert len(options) > 30 and "summarize --format" in options
    assert [name for name, help_ in options.items() if not (help_ or "").strip()] == []


def test_bad_set_value_is_one_error_line_naming_key_and_type(tmp_path):
    """What ``make report SET="iterations=abc"`` runs: one ``kts: error:`` line, exit 2, nothing created."""
    res = subprocess.run([sys.executable, "-m", "kts_helpers", "report", "--device", "cpu", "--set", "iterations=abc",
                          "--root", str(tmp_path / "runs"), "--report-dir", str(tmp_path / "r")],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines() == ["kts: error: parameter iterations='abc': expected an integer or 'auto'"]
    assert not (tmp_path / "runs").exists()
