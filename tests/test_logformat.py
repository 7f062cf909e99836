"""The log line's one contract (run/logformat) and the worker's own copy of it write and read the same lines."""

from __future__ import annotations

import json

import kts_api
import pytest

from kts_helpers.analyse.logparse import V1_COLS, V2_COLS, parse_bytes
from kts_helpers.run import logformat as lf

BIG_NS = 1_767_225_600_123_456_789  # 19 digits, above 2**53: a float round-trip would corrupt it


LINES = [
    lf.AppLine("fft", "fft-2", 0, "op", BIG_NS, BIG_NS + 17, BIG_NS + 5_000_123, 4.25, 5.000106),
    lf.AppLine("llm", "tenant-a", 41, "decode", BIG_NS, BIG_NS, BIG_NS + 1, 0.000001, 0.000001),
    lf.AppLine("gemm", "g", 3, lf.PAD_PHASE, 1, 2, 3, 123456.123456, 123456.5),
]


def test_the_worker_copies_the_contract(worker_module) -> None:
    assert (kts_api.APP_TAG, kts_api.META_TAG, kts_api.END_TAG) == (lf.APP_TAG, lf.META_TAG, lf.END_TAG)
    assert kts_api.LINE_VERSION == lf.VERSION and kts_api.PAD_PHASE == lf.PAD_PHASE


@pytest.mark.parametrize("line", LINES, ids=lambda x: x.phase)
def test_worker_lines_round_trip_through_the_contract(worker_module, line: lf.AppLine) -> None:
    text = kts_api.app_line(line.workload, line.tenant, line.iteration, line.phase, line.intended_ns, line.start_ns,
                           line.end_ns, line.device_ms, line.wall_ms)
    assert text == lf.format_line(line)  # the same bytes from either writer
    back = lf.parse_line(text + "\r\n")
    assert back == line and back.padding == (line.phase == lf.PAD_PHASE)
    assert lf.parse_line(text.encode()) == line
    assert lf.format_line(back) == text
    fields = text.split(",")
    assert fields[lf.position("start_ns")] == str(line.start_ns) and fields[lf.position("phase")] == line.phase


def test_worker_records_round_trip(worker_module) -> None:
    meta = {"workload": "fft", "tenant": "a", "gpu_uuid": None, "lead_in_s": 0.25, "notes": "x, y"}
    for tag in (lf.META_TAG, lf.END_TAG):
        text = kts_api.record_line(tag, meta)
        assert text == lf.format_record(tag, meta)
        assert lf.parse_line(text) == lf.LogRecord(tag, meta)
    with pytest.raises(ValueError, match="not a record tag"):
        lf.format_record(lf.APP_TAG, meta)


def test_the_vectorised_parser_reads_the_contracts_lines() -> None:
    """analyse/logparse takes its columns from the contract and reads what format_line writes, ns exact."""
    assert tuple(V2_COLS) == lf.V2_FIELDS and tuple(V1_COLS) == lf.V1_FIELDS
    blob = "\n".join([lf.format_record(lf.META_TAG, {"tenant": "fft-2"}), lf.format_line(LINES[0])]) + "\n"
    parsed = parse_bytes(blob.encode())
    row = parsed.frame.iloc[0]
    assert parsed.n == 1 and parsed.meta == [{"tenant": "fft-2"}]
    assert lf.AppLine(**{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}) == LINES[0]


@pytest.mark.parametrize("raw", [
    "", "Traceback (most recent call last):", "KTS_APP,v2,fft,fft,0,op,1,2", "KTS_APP,v3,a,b,0,op,1,2,3,1.0,1.0",
    "KTS_APP,v2,fft,fft,zero,op,1,2,3,1.0,1.0", "KTS_APP,v2,fft,fft,0,op,1,2,3,fast,1.0", "KTS_META,v2,{broken",
    "KTS_END,v2,[1, 2]", "KTS_APPLE,v2,fft,fft,0,op,1,2,3,1.0,1.0",
])
def test_what_is_not_a_line_parses_to_none(raw: str) -> None:
    assert lf.parse_line(raw) is None


def test_a_v1_line_reads_as_the_parser_reads_it() -> None:
    line = lf.parse_line(f"KTS_APP,v1,FFT,7,{BIG_NS},{BIG_NS + 2_500_000},2.0,op")
    assert line == lf.AppLine("fft", "fft", 7, "op", BIG_NS, BIG_NS, BIG_NS + 2_500_000, 2.0, 2.5, version="v1")
    frame = parse_bytes(f"KTS_APP,v1,FFT,7,{BIG_NS},{BIG_NS + 2_500_000},2.0,op\n".encode()).frame
    assert frame.iloc[0]["wall_ms"] == line.wall_ms and frame.iloc[0]["tenant"] == line.tenant
    assert json.loads(lf.format_record(lf.END_TAG, {"n": 1}).split(",", 2)[2]) == {"n": 1}
