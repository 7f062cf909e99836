"""CLI: ``python -m kts_helpers.run.telemetry {sample,scrape-dcgm,status} ...``.

``sample`` is what ``TelemetrySampler`` spawns; ``scrape-dcgm`` runs the DCGM poller in the
foreground (e.g. as a sidecar). Errors are one line on stderr and exit code 2; NVML or the
exporter being absent is not an error (exit 0, status "absent").
"""

from __future__ import annotations

import argparse
import json
import sys

from kts_helpers.run.telemetry._store import TelemetryError, count_rows, read_status
from kts_helpers.run.telemetry.dcgm import DcgmScraper
from kts_helpers.run.telemetry.nvml import run_sampler


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m kts_helpers.run.telemetry", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample", help="sample NVML (and GPM) into Parquet parts until the stop file appears")
    s.add_argument("--out", required=True, help="PATH.parquet (parts: PATH.partNNN.parquet, PATH.status.json)")
    s.add_argument("--interval-ms", type=float, default=100.0)
    s.add_argument("--stop-file", default=None, help="stop when this file exists (SIGTERM also stops cleanly)")
    s.add_argument("--gpu", type=int, default=0, help="NVML index of the GPU (when --gpu-uuid is not given)")
    s.add_argument("--gpu-uuid", default=None, help="the GPU by UUID (GPU-...), as CUDA reports it to the tenants")
    s.add_argument("--flush-s", type=float, default=2.0, help="seconds between part flushes")
    s.add_argument("--duration-s", type=float, default=None)
    d = sub.add_parser("scrape-dcgm", help="poll a dcgm-exporter /metrics page into Parquet parts")
    d.add_argument("--out", required=True)
    d.add_argument("--url", default="http://localhost:9400/metrics")
    d.add_argument("--interval-ms", type=float, default=1000.0)
    d.add_argument("--timeout-s", type=float, default=2.0)
    d.add_argument("--stop-file", default=None)
    d.add_argument("--flush-s", type=float, default=5.0)
    d.add_argument("--duration-s", type=float, default=None)
    st = sub.add_parser("status", help="print the status JSON and the rows on disk")
    st.add_argument("path")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "sample":
            result = run_sampler(args.out, interval_ms=args.interval_ms, stop_file=args.stop_file,
                                 gpu_index=args.gpu, flush_s=args.flush_s, duration_s=args.duration_s,
                                 gpu_uuid=args.gpu_uuid)
        elif args.cmd == "scrape-dcgm":
            result = DcgmScraper(args.url, args.out, args.interval_ms, timeout_s=args.timeout_s,
                                 flush_s=args.flush_s).run(stop_file=args.stop_file, duration_s=args.duration_s)
        else:
            result = read_status(args.path) or {"status": "absent", "reason": "no status file"}
            result = {**result, "rows_on_disk": count_rows(args.path)}
    except TelemetryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
