#!/usr/bin/env bash
# The stranger-context check on a real GPU (issue 50): NVML's memory info in version 2, the driver's reserve apart.
#   bash bench/h200/stranger_check.sh            (from the repository root, on the GPU host; about 3 minutes)
# Runs the kit's warm design with small settings (every block runs the check the kit runs: run.gpumem.check_block,
# from each tenant's KTS_END reading by workers/kts_gpumem.py):
#   1. ts2   fft+gemm, time-slicing: alone blocks (1 tenant timing, 1 idle resident), shared blocks (2), the control
#            block (1 tenant, the neighbour gone);
#   2. ts3   fft+gemm+llm (the builtin one): alone blocks beside 2 idle residents, shared blocks of 3;
#   3. mps2  fft+gemm under the kit's own MPS daemon (private pipe folder, always quit): the server told apart;
#   4. strg  fft+gemm with a stranger: a separate python3 holding a 1 GiB tensor on the GPU, started before the run and
#            killed after; the run must fail at its first block, naming the stranger's PID.
# Before them it reads NVML's memory info both ways on the idle GPU (v1 "used" includes the reserve; v2 reports it).
# Writes to $OUT: summary.txt (what to look at), nvml.txt, each run's manifest (records) and logs as <label>.tgz,
# each run's console output <label>.out. Changes no GPU setting. DEVICE=cpu runs the same plumbing on a CPU host
# (tiny sizes; every check is then "unknown": no NVML reading off CUDA).
set -uo pipefail
OUT=${OUT:-/tmp/kts-out}
DEVICE=${DEVICE:-cuda}
mkdir -p "$OUT/runs"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
SMALL="--set iterations=60 --set blocks=2 --set calibrate_iterations=200 --set sleep_ms_fft=2 --set sleep_ms_gemm=3"
SMALL="$SMALL --set sleep_ms_llm=2 --set timeout_s=120"
if [ "$DEVICE" = cpu ]; then  # tiny sizes: the builtin llm at its default size takes minutes a run on a CPU
  SMALL="$SMALL --set fft_size=64 --set gemm_size=64 --set design=warm"
  export LLM_D_MODEL=64 LLM_LAYERS=1 LLM_HEADS=2 LLM_PROMPT_TOKENS=16 LLM_DECODE_TOKENS=2
fi

"$PY" - > "$OUT/nvml.txt" 2>&1 <<'EOF'
# NVML's memory info of the idle GPU, both versions, straight from nvidia-ml-py
try:
    import pynvml
except ImportError as exc:
    raise SystemExit(f"no nvidia-ml-py: {exc}")
print("nvidia-ml-py", getattr(pynvml, "__version__", "?"), "| has nvmlMemory_v2:", hasattr(pynvml, "nvmlMemory_v2"))
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
print("driver", pynvml.nvmlSystemGetDriverVersion(), "| GPU", pynvml.nvmlDeviceGetName(h))
m1 = pynvml.nvmlDeviceGetMemoryInfo(h)
print(f"v1: total {m1.total / 2**20:.1f} MiB, used {m1.used / 2**20:.1f} MiB, free {m1.free / 2**20:.1f} MiB")
m2 = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
print(f"v2: total {m2.total / 2**20:.1f} MiB, reserved {m2.reserved / 2**20:.1f} MiB, used {m2.used / 2**20:.1f} MiB, "
      f"free {m2.free / 2**20:.1f} MiB; total - reserved - free = {(m2.total - m2.reserved - m2.free) / 2**20:.1f} MiB")
print("compute processes:", [(p.pid, p.usedGpuMemory) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)])
pynvml.nvmlShutdown()
EOF

run() {  # label, then kts run arguments
  local label=$1; shift
  local t0; t0=$(date +%s)
  "$PY" -m kts_helpers run --device "$DEVICE" --root "$OUT/runs" --run-id "$label" --label "$label" --quiet \
    --profile article $SMALL "$@" > "$OUT/$label.out" 2>&1
  echo -e "$label\trc=$?\t$(( $(date +%s) - t0 )) s" | tee -a "$OUT/times.tsv"
}

run ts2 --set workloads=fft,gemm
run ts3 --set workloads=fft,gemm,llm
if [ "$DEVICE" = cuda ]; then run mps2 --set workloads=fft,gemm --set sharing=mps; fi

# the stranger: its own process, a 1 GiB tensor on the GPU (plus its CUDA context), from before the run to after it
"$PY" -c "
import sys, time, torch
dev = sys.argv[1]
x = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
x.fill_(1)
print('stranger holding', x.numel() >> 20, 'MiB on', dev, flush=True)
time.sleep(600)" "$DEVICE" > "$OUT/stranger.out" 2>&1 &
STRANGER=$!
for _ in $(seq 1 120); do grep -q holding "$OUT/stranger.out" 2>/dev/null && break; sleep 0.5; done
echo "stranger pid $STRANGER: $(cat "$OUT/stranger.out")" | tee -a "$OUT/times.tsv"
run strg --set workloads=fft,gemm --set calibrate_iterations=0  # no calibration: the first block is a warm one
kill "$STRANGER" 2>/dev/null; wait "$STRANGER" 2>/dev/null

"$PY" - "$OUT" "$STRANGER" > "$OUT/summary.txt" 2>&1 <<'EOF'
# each block's stranger check, from the runs' records
import json, sys
from pathlib import Path
out, stranger = Path(sys.argv[1]), int(sys.argv[2])
print((out / "nvml.txt").read_text())
for label in ("ts2", "ts3", "mps2", "strg"):
    path = out / "runs" / label / "manifest.json"
    if not path.exists():
        said = (out / f"{label}.out").read_text()[-400:] if (out / f"{label}.out").exists() else "not run"
        print(f"== {label}: no run ({said})")
        continue
    m = json.loads(path.read_text())
    print(f"== {label}: run {m['status']}")
    counts = {}
    for name, rec in m["scenarios"].items():
        g = rec.get("gpu_memory") or {}
        counts[g.get("status")] = counts.get(g.get("status"), 0) + 1
        tenants = len(rec.get("tenants") or {})
        print(f"  {name:22s} {rec['status']:9s} tenants={tenants} check={g.get('status')} "
              f"unexplained={g.get('unexplained_mib')} MiB reserved={g.get('device_reserved_mib')} MiB "
              f"used={g.get('device_used_mib')} MiB own={g.get('tenants_mib')} companions={g.get('companions_mib')}"
              + (f" reason={g.get('reason')}" if g.get("reason") else "")
              + (f" strangers={g.get('strangers')}" if g.get("strangers") else ""))
    print(f"  checks: {counts}")
    bad = [n for n, r in m["scenarios"].items() if (r.get("gpu_memory") or {}).get("status") == "stranger"]
    named = any(s.get("pid") == stranger for n in bad for s in m["scenarios"][n]["gpu_memory"].get("strangers", []))
    if label == "strg":
        print(f"  EXPECT: the first block fails as a stranger naming pid {stranger}: "
              f"{'YES' if bad and named else 'NO'} ({m['scenarios'][bad[0]].get('reason') if bad else '-'})")
    else:
        ok = all((r.get("gpu_memory") or {}).get("status") == "ok" for r in m["scenarios"].values())
        print(f"  EXPECT: every block's check ok, no stranger: {'YES' if ok and m['status'] == 'complete' else 'NO'}")
EOF
cat "$OUT/summary.txt"
for label in ts2 ts3 mps2 strg; do
  [ -d "$OUT/runs/$label" ] && (cd "$OUT/runs" && tar czf "$OUT/$label.tgz" "$label" && rm -rf "$label")
done
rmdir "$OUT/runs" 2>/dev/null || true
