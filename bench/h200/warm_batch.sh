#!/usr/bin/env bash
# The warm-tenants batch on one H200 (issue 43), as run through the device tool: each argument names a run of the
# table below; every run goes to $OUT/runs/<label>, its wall time to $OUT/times.tsv, and each run back as one
# tarball, $OUT/<label>.tgz. Nothing here changes a GPU setting; MPS daemons are the kit's own (private pipe folders, always quit).
#   bash bench/h200/warm_batch.sh rm-fresh-ts rm-warm-ts       # the real-model mix, both designs, time-slicing
#   bash bench/h200/warm_batch.sh rm-warm-ts-24                # the same mix in 24 shared blocks (the blocks plan's check)
#   bash bench/h200/warm_batch.sh headline                     # the article profile at its defaults: the README's next
#                                                                headline run (kts_helpers/present/reference.py, HEADLINE_RUN)
set -uo pipefail
OUT=${OUT:-/tmp/kts-out}
mkdir -p "$OUT/runs"
export PYTHONUNBUFFERED=1
if ! python3 -c 'import transformers' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
RMW="--set workloads=llama-decode,bert,resnet"
RM="$RMW --set iterations=300"
run() {  # label, then kts run arguments
  local label=$1; shift
  local t0; t0=$(date +%s.%N)
  python3 -m kts_helpers run --device cuda --root "$OUT/runs" --run-id "$label" --label "$label" --quiet "$@" \
    > "$OUT/$label.out" 2>&1
  local rc=$?
  echo -e "$label\t$rc\t$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")" | tee -a "$OUT/times.tsv"
  tail -3 "$OUT/$label.out"
  (cd "$OUT/runs" && tar czf "$OUT/$label.tgz" "$label" && rm -rf "$label")  # each run back whole, even if a later one is cut off
}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE 'H[0-9]+' | tr A-Z a-z)  # the label says which card
GPU=${GPU:-gpu}
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,memory.used --format=csv > "$OUT/gpu.csv" 2>&1
for what in "$@"; do
  case $what in
    rm-fresh-ts) run h200-2026-12-04-rm-fresh-ts --profile article $RM --set design=fresh --set blocks=2 ;;
    rm-warm-ts)  run h200-2026-12-04-rm-warm-ts --profile article $RM ;;
    rm-warm-mps) run h200-2026-12-04-rm-warm-mps --profile article $RM --set sharing=mps ;;
    article)     run h200-2026-12-04-article-warm --profile article ;;
    headline)    run $GPU-$(date +%F)-article-headline --profile article ;;  # whatever design and blocks it resolves to
    rm-warm-ts-24*)  run $GPU-$(date +%F)-$what --profile article $RMW --set blocks=24 --set iterations=150 ;;
    rm-warm-mps-24*) run $GPU-$(date +%F)-$what --profile article $RMW --set blocks=24 --set iterations=150 --set sharing=mps ;;
    *) echo "unknown run $what" ;;
  esac
done
rmdir "$OUT/runs" 2>/dev/null || true
