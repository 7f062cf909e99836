#!/usr/bin/env bash
# Issue 52's GPU runs, as run through the device tool: the real-model mix at the kit's defaults (blocks=auto) and
# at a fixed 8 blocks on the same card in one call (their wall times compare), and a second mix under MPS at
# the defaults. Each run goes to $OUT/runs/<label>, its wall time to $OUT/times.tsv, and comes back as one tarball
# $OUT/<label>.tgz. Nothing here changes a GPU setting; MPS daemons are the kit's own (private pipe folders,
# always quit).
#   bash bench/h200/auto_batch.sh rm-fixed8 rm-auto        # llama-decode + BERT + ResNet-50, time-slicing
#   bash bench/h200/auto_batch.sh mps-gpt2-vit             # a user's GPT-2 decode next to ViT-B/16 training, MPS
#   bash bench/h200/auto_batch.sh mps-whisper-convnext     # a Whisper-style decode next to ConvNeXt-T training, MPS
#   bash bench/h200/auto_batch.sh rm-syncs                 # the mix short (100 iterations, 2 blocks, about a minute):
#       its alone profiles (kts_profile v3) count each tenant's host waits mid-op (host_syncs: BERT's on CUDA is
#       what plan.engine.sync_waits bounds), when the session's device time is short
set -uo pipefail
OUT=${OUT:-/tmp/kts-out}
mkdir -p "$OUT/runs"
export PYTHONUNBUFFERED=1
if ! python3 -c 'import transformers' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/examples:$PWD${PYTHONPATH:+:$PYTHONPATH}"
RM="--set workloads=llama-decode,bert,resnet"
F=serve_and_train
run() {  # label, then kts run arguments
  local label=$1${CARD:+-$CARD}; shift  # the card's id: two cards' runs of one day never share a name
  local t0; t0=$(date +%s.%N)
  # shellcheck disable=SC2086 # EXTRA: more kts run arguments, e.g. EXTRA="--set iterations=300"
  python3 -m kts_helpers run --device cuda --root "$OUT/runs" --run-id "$label" --label "$label" "$@" ${EXTRA:-} \
    > "$OUT/$label.out" 2> "$OUT/$label.err"
  local rc=$?
  echo -e "$label\t$rc\t$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")" | tee -a "$OUT/times.tsv"
  grep -E "^kts: .*(look|blocks=auto)" "$OUT/$label.err" | tail -8
  tail -2 "$OUT/$label.err" | grep -v "it/s" | cut -c1-300
  (cd "$OUT/runs" && tar czf "$OUT/$label.tgz" "$label" && rm -rf "$label")
}
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE 'H[0-9]+' | tr A-Z a-z)
GPU=${GPU:-gpu}
CARD=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1 | cut -c5-12)
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,memory.used --format=csv >> "$OUT/gpu.csv" 2>&1
for what in "$@"; do
  case $what in
    rm-fixed8)    run "$GPU-$(date +%F)-rm-fixed8" --profile article $RM --set blocks=8 ;;
    rm-auto)      run "$GPU-$(date +%F)-rm-auto" --profile article $RM ;;
    rm-syncs)     run "$GPU-$(date +%F)-rm-syncs" --profile article $RM --set iterations=100 --set blocks=2 ;;
    mps-gpt2-vit) run "$GPU-$(date +%F)-mps-gpt2-vit-auto" --profile article --set sharing=mps \
                    --set workloads=$F:make_gpt2_decode,$F:make_vit_train ;;
    mps-whisper-convnext) run "$GPU-$(date +%F)-mps-whisper-convnext-auto" --profile article --set sharing=mps \
                    --set workloads=$F:make_whisper_decode,$F:make_convnext_train ;;
    *) echo "unknown run $what" ;;
  esac
done
rmdir "$OUT/runs" 2>/dev/null || true
