"""logparse: v1 and v2 lines, junk of every kind, exact epoch-ns, fast and robust paths agreeing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from kts_helpers.analyse.logparse import COLUMNS, parse_bytes, parse_file, parse_files
from kts_helpers.errors import LogParseError

T0 = 1795974308654992882  # a realistic 19-digit epoch-ns


def _v1(i, start, end, dev, workload="FFT", phase="op"):
    return f"KTS_APP,v1,{workload},{i},{start},{end},{dev},{phase}"


def _v2(i, start, end, dev, wall, workload="gemm", tenant="gemm-a", phase="op", due=None):
    return f"KTS_APP,v2,{workload},{tenant},{i},{phase},{start if due is None else due},{start},{end},{dev},{wall}"


def _lines(n, *, version="v2", seed=0, workload=None):
    rng = np.random.default_rng(seed)
    out = []
    t = T0
    for i in range(n):
        dev = round(float(rng.uniform(0.5, 20.0)), 6)
        dur = int(dev * 1e6) + int(rng.integers(0, 500_000))
        if version == "v1":
            out.append(_v1(i, t, t + dur, dev, workload=workload or "FFT"))
        else:
            out.append(_v2(i, t, t + dur, dev, round(dur / 1e6, 6), workload=workload or "gemm"))
        t += dur + int(rng.integers(1_000, 2_000_000))
    return out


def _blob(lines, eol=b"\n"):
    return b"".join((ln if isinstance(ln, bytes) else ln.encode()) + eol for ln in lines)


def test_v2_line_fields_typed_exactly():
    line = _v2(7, T0, T0 + 2_500_000, 1.25, 2.5, phase="decode", due=T0 - 10)
    p = parse_bytes((line + "\n").encode())
    assert p.n == 1 and p.malformed == 0 and p.other == 0
    row = p.frame.iloc[0]
    assert list(p.frame.columns) == COLUMNS
    assert (row["workload"], row["tenant"], row["iteration"], row["phase"], row["version"]) == \
        ("gemm", "gemm-a", 7, "decode", "v2")
    assert int(row["intended_ns"]) == T0 - 10
    assert int(row["start_ns"]) == T0 and int(row["end_ns"]) == T0 + 2_500_000
    assert row["device_ms"] == 1.25 and row["wall_ms"] == 2.5
    for c in ("intended_ns", "start_ns", "end_ns", "iteration"):
        assert p.frame[c].dtype == np.int64


def test_v1_line_wall_from_epochs_and_lowercased_tenant():
    lines = _lines(50, version="v1")
    p = parse_bytes(_blob(lines))
    assert p.n == 50 and p.malformed == 0
    fields = [ln.split(",") for ln in lines]
    start = np.array([int(f[4]) for f in fields], dtype=np.int64)
    end = np.array([int(f[5]) for f in fields], dtype=np.int64)
    assert (p.frame["start_ns"].to_numpy() == start).all()
    assert (p.frame["intended_ns"].to_numpy() == start).all()
    assert (p.frame["end_ns"].to_numpy() == end).all()
    np.testing.assert_array_equal(p.frame["wall_ms"].to_numpy(), (end - start) / 1e6)
    np.testing.assert_array_equal(p.frame["device_ms"].to_numpy(), [float(f[6]) for f in fields])
    assert set(p.frame["workload"]) == {"fft"} and set(p.frame["tenant"]) == {"fft"}
    assert set(p.frame["version"]) == {"v1"}


def test_v1_tenant_named_by_caller():
    p = parse_bytes(_blob(_lines(5, version="v1")), tenant="tenant-x")
    assert set(p.frame["tenant"]) == {"tenant-x"}
    assert set(p.frame["workload"]) == {"fft"}


@pytest.mark.parametrize("value", [9223372036854775807, 1795974308654992882, 1000000000000000001])
@pytest.mark.parametrize("junk", [False, True], ids=["fast", "robust"])
def test_19_digit_epoch_kept_exactly(value, junk):
    text = f"KTS_APP,v1,GEMM,0,{value - 5_000_000},{value},1.0,op"
    lines = [text] + ([b"garbage \xff\xfe", "Traceback (most recent call last):"] if junk else [])
    p = parse_bytes(_blob(lines))
    assert p.n == 1
    assert int(p.frame["end_ns"].iloc[0]) == int(text.split(",")[5])
    assert int(p.frame["start_ns"].iloc[0]) == int(text.split(",")[4])
    assert p.frame["wall_ms"].iloc[0] == 5.0


def test_value_past_int64_is_malformed_not_an_error():
    lines = _lines(3) + ["KTS_APP,v2,gemm,gemm-a,3,op,1,2,9999999999999999999,1.0,1.0"]
    for extra in ([], [b"\xff junk"]):
        p = parse_bytes(_blob(lines + extra))
        assert p.n == 3 and p.malformed == 1


def test_junk_of_every_kind_counted_valid_lines_all_kept():
    valid = _lines(40, seed=3)
    junk_other = ["Traceback (most recent call last):", '  File "kts_worker.py", line 12, in <module>',
                  "RuntimeError: CUDA error: out of memory", b"\xff\xfe\x00garbage \x80\x81", "some print"]
    junk_app = [valid[5][:25], "KTS_APP,v2,gemm", "KTS_APP,v9,x,y,1,op,1,2,3,1.0,1.0",
                "KTS_APP,v2,gemm,gemm-a,x,op,1,2,3,1.0,1.0", b"KTS_APP,v2,ge\xffmm,gemm-a,1,op,1,2,3,1.0,1.0",
                "KTS_APP,v2,gemm,gemm-a,1,op,1,2,3,1.0,"]
    meta = 'KTS_META,v2,{"tenant":"gemm-a","flops_per_op":65536.0,"pid":42}'
    lines = [meta] + valid[:10] + junk_other[:3] + valid[10:20] + junk_app + valid[20:30] + \
        [junk_other[3], "", junk_other[4]] + valid[30:] + [valid[-1][:40]]  # truncated last line
    p = parse_bytes(_blob(lines))
    assert p.n == 40
    assert p.malformed == len(junk_app) + 1
    assert p.other == len(junk_other)
    assert p.meta == [{"tenant": "gemm-a", "flops_per_op": 65536.0, "pid": 42}]
    assert p.frame["iteration"].tolist() == list(range(40))
    clean = parse_bytes(_blob(valid))
    pd.testing.assert_frame_equal(p.frame, clean.frame)


def test_crlf_endings():
    valid = _lines(20)
    lf = parse_bytes(_blob(valid))
    crlf = parse_bytes(_blob(valid, eol=b"\r\n"))
    crlf_junk = parse_bytes(_blob(valid + [b"\xffbad"], eol=b"\r\n"))
    assert lf.n == crlf.n == crlf_junk.n == 20
    assert crlf.malformed == crlf_junk.malformed == 0
    pd.testing.assert_frame_equal(lf.frame, crlf.frame)
    pd.testing.assert_frame_equal(lf.frame, crlf_junk.frame)
    assert set(crlf_junk.frame["phase"]) == {"op"}


def test_crlf_v1_phase_has_no_carriage_return():
    p = parse_bytes(_blob(_lines(5, version="v1") + [b"\x80"], eol=b"\r\n"))
    assert set(p.frame["phase"]) == {"op"}


def test_meta_lines_are_not_other_and_bad_meta_is_malformed():
    lines = ['KTS_META,v2,{"a":1}', "KTS_META,v2,{not json", *_lines(3)]
    p = parse_bytes(_blob(lines))
    assert p.meta == [{"a": 1}]
    assert p.n == 3 and p.other == 0 and p.malformed == 1


def test_empty_input():
    p = parse_bytes(b"")
    assert p.n == 0 and p.malformed == 0 and p.other == 0
    assert list(p.frame.columns) == COLUMNS
    only_junk = parse_bytes(b"hello\nworld\n\xff\n")
    assert only_junk.n == 0 and only_junk.other == 3


def test_parse_files_empty_or_junk_raises_one_line(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"Traceback\n\xff\xfe\nKTS_APP,v2,trunc\n")
    for paths in ([empty], [empty, junk], []):
        with pytest.raises(LogParseError) as exc:
            parse_files(paths)
        assert "\n" not in str(exc.value)
        assert "no valid KTS_APP lines" in str(exc.value)
    assert parse_files([empty], require=False).n == 0


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(LogParseError, match="does not exist"):
        parse_file(tmp_path / "nope.log")
    with pytest.raises(LogParseError, match="directory"):
        parse_file(tmp_path)


def test_parse_files_concatenates_with_source_and_counts(make_log):
    a = make_log("a.log", _lines(10, seed=1) + ["junk"])
    b = make_log("b.log", _lines(7, version="v1", seed=2) + ["KTS_APP,v1,FFT,1"])
    p = parse_files([a, b])
    assert p.n == 17 and p.other == 1 and p.malformed == 1
    assert p.frame["source"].value_counts().to_dict() == {str(a): 10, str(b): 7}
    assert p.sources == [str(a), str(b)]


@pytest.mark.parametrize("first", ["v1", "v2"])
def test_mixed_v1_and_v2_in_one_file(first):
    v1 = _lines(12, version="v1", seed=4)
    v2 = _lines(9, version="v2", seed=5)
    mixed = [x for pair in zip(v1, v2, strict=False) for x in pair] + v1[9:]
    if first == "v2":
        mixed = [v2[0]] + [x for x in mixed if x != v2[0]]
    p = parse_bytes(_blob(mixed))
    assert p.n == 21 and p.malformed == 0 and p.other == 0
    assert p.frame["version"].value_counts().to_dict() == {"v1": 12, "v2": 9}
    got_v1 = p.frame[p.frame["version"] == "v1"].reset_index(drop=True)
    got_v2 = p.frame[p.frame["version"] == "v2"].reset_index(drop=True)
    pd.testing.assert_frame_equal(got_v1, parse_bytes(_blob(v1)).frame, check_dtype=False)
    pd.testing.assert_frame_equal(got_v2, parse_bytes(_blob(v2)).frame, check_dtype=False)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_fast_and_robust_paths_agree(version):
    valid = _lines(3000, version=version, seed=7)
    fast = parse_bytes(_blob(valid))  # clean ASCII: the Arrow fast path
    junky = list(valid)
    for k, pos in enumerate(range(100, 3000, 250)):
        junky.insert(pos + k, b"\xff\xfe not utf-8" if k % 2 else "Traceback (most recent call last):")
    robust = parse_bytes(_blob(junky))  # non-ASCII: the line-by-line regex path
    ascii_junk = parse_bytes(_blob([ln for ln in junky if isinstance(ln, str)]))  # fast path + set-aside rows
    assert fast.n == robust.n == ascii_junk.n == 3000
    assert robust.other == 12 and ascii_junk.other == 6
    pd.testing.assert_frame_equal(fast.frame, robust.frame)
    pd.testing.assert_frame_equal(fast.frame, ascii_junk.frame)


@pytest.mark.parametrize("bad", [
    "KTS_APP,v2,gemm,gemm-a,1,op,1,2,3,1.0,",  # cut right after the last comma
    "KTS_APP,v2,gemm,gemm-a,1,op,,2,3,1.0,1.0",  # empty integer
    "KTS_APP,v2,gemm,gemm-a,-1,op,1,2,3,1.0,1.0",  # negative iteration
    "KTS_APP,v2,gemm,gemm-a,1,op,1,2,3,nan,1.0",
    "KTS_APP,v2,gemm,gemm-a,1,op,1,2,3,NA,1.0",
    "KTS_APP,v2,,gemm-a,1,op,1,2,3,1.0,1.0",  # empty workload
    "KTS_APP,v2,ge mm,gemm-a,1,op,1,2,3,1.0,1.0",
])
def test_lines_the_format_forbids_rejected_by_both_paths(bad):
    valid = _lines(4)
    clean = parse_bytes(_blob(valid)).frame
    for extra in ([], [b"\xff"]):
        p = parse_bytes(_blob(valid + [bad] + extra))
        assert p.n == 4, (bad, extra)
        assert p.malformed + p.n_rejected == 1
        pd.testing.assert_frame_equal(p.frame, clean)  # the rest exact: int64 epochs, no NaN


@pytest.mark.parametrize("bad", ["ten ant", ""])
def test_a_log_whose_lines_all_carry_one_bad_name_keeps_none(bad):
    """The usual log names one tenant throughout, and the name is checked once: a bad one rejects every line."""
    lines = [_v2(i, T0 + i * 10**8, T0 + i * 10**8 + 2_000_000, 1.0, 2.0, tenant=bad) for i in range(5)]
    p = parse_bytes(_blob(lines))
    assert p.n == 0 and p.rejected == {"bad name or iteration": 5} and p.malformed == p.other == 0


def test_rows_of_the_lines_shape_with_another_tag_or_version_are_not_lines():
    valid = _lines(5)
    odd = ["KTS_APX,v2,gemm,gemm-a,9,op,1,2,3,1.0,1.0", "KTS_APP,v9,gemm,gemm-a,9,op,1,2,3,1.0,1.0",
           "csv,print,a,b,1,op,1,2,3,1.0,1.0"]
    p = parse_bytes(_blob(valid[:2] + odd + valid[2:]))
    assert (p.n, p.malformed, p.other, p.n_rejected) == (5, 1, 2, 0)
    pd.testing.assert_frame_equal(p.frame, parse_bytes(_blob(valid)).frame)


# ---------------------------------------------------------------- lines that parse but cannot be true

IMPOSSIBLE = {
    "negative device ms": (_v2(90, T0, T0 + 2_000_000, -1.0, 2.0), "not a finite positive time"),
    "negative wall ms": (_v2(90, T0, T0 + 2_000_000, 1.0, -2.0), "not a finite positive time"),
    "zero wall ms": (_v2(90, T0, T0, 0.0, 0.0), "not a finite positive time"),
    "end before start": (_v2(90, T0, T0 - 2_000_000, 1.0, 2.0), "end before start"),
    "device far above wall": (_v2(90, T0, T0 + 2_000_000, 50.0, 2.0), "device time above wall time"),
    "wall not end - start": (_v2(90, T0, T0 + 2_000_000, 1.0, 40.0), "wall time differs from end - start"),
    "zero start": (_v2(90, 0, 2_000_000, 1.0, 2.0, due=0), "not a finite positive time"),
    "1e400 becomes inf": (_v2(90, T0, T0 + 2_000_000, 1.0, "1e400"), "not a finite positive time"),
    "nan": (_v2(90, T0, T0 + 2_000_000, "nan", 2.0), "not a finite positive time"),
    "v1 device above end - start": (_v1(90, T0, T0 + 2_000_000, 9.0), "device time above wall time"),
}


@pytest.mark.parametrize("name", list(IMPOSSIBLE))
@pytest.mark.parametrize("path", ["fast", "robust"])
def test_impossible_lines_are_rejected_and_counted(name, path):
    line, reason = IMPOSSIBLE[name]
    valid = _lines(30, version="v1" if name.startswith("v1") else "v2", seed=2)
    extra = [b"\xff robust path"] if path == "robust" else []
    p = parse_bytes(_blob(valid[:10] + [line] + valid[10:] + extra))
    assert p.n == 30 and p.rejected == {reason: 1} and p.malformed == 0, (name, p.rejected, p.malformed)
    assert (p.frame["iteration"] != 90).all()


def test_tolerances_are_stated_and_kept():
    """Within the stated tolerance a line stays: device 1 % + 0.05 ms above wall, end - start 1 % + 1 ms off."""
    from kts_helpers.analyse import logparse as L

    ok = [_v2(0, T0, T0 + 10_000_000, 10.0 * (1 + L.DEVICE_TOL_REL) + L.DEVICE_TOL_MS * 0.9, 10.0),
          _v2(1, T0 + 10**8, T0 + 10**8 + 10_000_000, 5.0, 10.0 - L.SPAN_TOL_MS - 0.05)]
    p = parse_bytes(_blob(ok))
    assert p.n == 2 and p.n_rejected == 0
    # preempted between the epoch and the monotonic reads: end - start exceeds wall; a real (slow) line, kept
    late = _v2(2, T0 + 2 * 10**8, T0 + 2 * 10**8 + 10_000_000 + int(L.SPAN_SLACK_MS * 0.9e6), 5.0, 10.0)
    beyond = _v2(3, T0 + 3 * 10**8, T0 + 3 * 10**8 + 10_000_000 + int(L.SPAN_SLACK_MS * 1.2e6), 5.0, 10.0)
    p = parse_bytes(_blob(ok + [late, beyond]))
    assert p.n == 3 and p.rejected == {"wall time differs from end - start": 1}


def test_a_line_printed_twice_in_a_row_is_a_duplicate():
    lines = _lines(20, seed=6)
    p = parse_bytes(_blob(lines[:8] + [lines[7]] + lines[8:]))
    assert p.n == 20 and p.rejected == {"duplicate": 1}


def test_duplicates_are_rejected_but_llm_decode_steps_and_padding_are_not():
    lines = _lines(20, seed=6)
    t = T0 + 10**12  # a restarted pod appends iterations 0..4 again, later
    later = [_v2(i, t + i * 10**7, t + i * 10**7 + 10**6, 0.9, 1.0) for i in range(5)]
    p = parse_bytes(_blob(lines + [lines[7]] + later))
    assert p.n == 20 and p.rejected == {"duplicate": 6}
    # an llm iteration: one prefill and several decode steps share the iteration number; padding has its own counter
    t = T0
    llm = []
    for i in range(3):
        for ph in ("prefill", "decode", "decode", "decode"):
            llm.append(_v2(i, t, t + 1_000_000, 0.9, 1.0, workload="llm", tenant="llm", phase=ph))
            t += 2_000_000
    pads = [_v2(k, T0 - 10**9 + k * 10**7, T0 - 10**9 + k * 10**7 + 10**6, 0.9, 1.0, workload="llm", tenant="llm",
                phase="pad") for k in range(4)]
    p = parse_bytes(_blob(pads[:2] + llm + pads[2:]))
    assert p.n == 16 and p.n_rejected == 0


def test_end_and_meta_records_are_collected_not_junk():
    end = 'KTS_END,v2,{"tenant":"gemm-a","n":30,"reason":"target reached"}'
    p = parse_bytes(_blob(['KTS_META,v2,{"tenant":"gemm-a"}'] + _lines(30) + [end]))
    assert p.n == 30 and p.other == 0 and p.malformed == 0
    assert p.ends == [{"tenant": "gemm-a", "n": 30, "reason": "target reached"}] and len(p.meta) == 1


@pytest.mark.parametrize("bad", ["nan", "abc", "1e400", "-5.0"])
def test_one_odd_value_does_not_send_the_file_line_by_line(bad, monkeypatch):
    from kts_helpers.analyse import logparse as L

    seen: list[int] = []
    real = L._robust
    monkeypatch.setattr(L, "_robust", lambda data: seen.append(len(data)) or real(data))
    lines = _lines(5000, seed=8)
    lines[2500] = lines[2500].rsplit(",", 1)[0] + f",{bad}"
    p = parse_bytes(_blob(lines))
    assert p.n == 4999 and p.malformed + p.n_rejected == 1
    assert sum(seen) < 200  # nothing, or only the odd line, went the slow way
