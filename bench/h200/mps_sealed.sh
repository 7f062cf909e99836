#!/usr/bin/env bash
# Issue 51's sealed runs: a serving decode next to a full-size training step under MPS, warm design, at the kit's
# defaults but for the iteration count (about a minute and a half a run). Made before the planner's MPS model reads
# kernel lengths, and scored once after it: nobody tunes the model on them. The tenants are a user's factories
# (examples/serve_and_train.py, random weights from configs, nothing downloaded). Each run goes to
# $OUT/runs/<label>, comes back as one tarball $OUT/<label>.tgz, its wall time in $OUT/times.tsv. Nothing here
# changes a GPU setting; the MPS daemon is the kit's own (a private pipe folder, always quit).
#   bash bench/h200/mps_sealed.sh                          # both pairs (the default)
#   bash bench/h200/mps_sealed.sh gpt2-vit                 # GPT-2 medium decode next to ViT-B/16 training
#   bash bench/h200/mps_sealed.sh whisper-convnext         # Whisper-small-style decode next to ConvNeXt-T training
#   bash bench/h200/mps_sealed.sh gpt2-convnext whisper-vit  # the second seal (2026-12-06): the pairs crossed
#   bash bench/h200/mps_sealed.sh llama-vit gpt2-train llama-convnext  # the third seal (2026-12-06, later): the
#       kit's own Llama server next to a user's training steps, a user's GPT-2 server next to the kit's Llama training
#   SHARING=timeslice bash bench/h200/mps_sealed.sh gpt2-train llama-convnext whisper-train  # time-slicing's second
#       seal (2026-12-07): measured after each op took its phase's busy share (timeslice.Op), scored once
#   SHARING=timeslice bash bench/h200/mps_sealed.sh llama-resnet gpt2-resnet whisper-resnet bert-resnet  # a GPU-bound chain (ResNet-50 inference,
#       batch 128: its queue never empties) next to a launch-bound server (2026-12-07, after f335510: such a chain
#       keeps its quantum), scored once
#   SHARING=timeslice bash bench/h200/mps_sealed.sh whisper-resnet bert-resnet gpt2-bert-resnet  # the fourth seal
#       (2026-12-07, the next session): the chain next to two more servers, and three tenants (a user's GPT-2 server,
#       BERT, ResNet-50 at its default batch); whisper-bert-resnet is a second three-tenant mix
#   SHARING=timeslice bash bench/h200/mps_sealed.sh whisper-bert-resnet llama-bert-resnet  # the fifth seal (2026-12-07,
#       later, GPU-110437b4): two three-tenant mixes measured before any three-tenant rule, committed unread, to be
#       scored once after one is frozen
# A CPU check of the same path (tiny models, timeslice since MPS needs a GPU, a few iterations):
#   DEVICE=cpu SHARING=timeslice ITERATIONS=12 EXTRA="--set blocks=2 --set block_s=0.2" bash bench/h200/mps_sealed.sh
set -uo pipefail
OUT=${OUT:-/tmp/kts-out}
DEVICE=${DEVICE:-cuda}
SHARING=${SHARING:-mps}
ITERATIONS=${ITERATIONS:-200}  # 25 iterations (200 decode steps) a shared block; alone blocks 22
EXTRA=${EXTRA:-}
mkdir -p "$OUT/runs"
export PYTHONUNBUFFERED=1
if ! python3 -c 'import transformers' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/examples:$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the tenants' module, as a user puts it
F=serve_and_train
run() {  # label, then kts run arguments
  local label=$1${CARD:+-$CARD}; shift  # the card's id: two cards' runs of one day never share a name
  local t0; t0=$(date +%s.%N)
  # shellcheck disable=SC2086 # EXTRA is a list of arguments
  python3 -m kts_helpers run --device "$DEVICE" --root "$OUT/runs" --run-id "$label" --label "$label" --quiet \
    --profile article --set sharing="$SHARING" --set iterations="$ITERATIONS" "$@" $EXTRA > "$OUT/$label.out" 2>&1
  local rc=$?
  echo -e "$label\t$rc\t$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")" | tee -a "$OUT/times.tsv"
  tail -3 "$OUT/$label.out"
  (cd "$OUT/runs" && tar czf "$OUT/$label.tgz" "$label" && rm -rf "$label")  # each run back whole, even if a later one is cut off
}
if command -v nvidia-smi > /dev/null; then
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -oE 'H[0-9]+' | tr A-Z a-z)  # the card
  CARD=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1 | cut -c5-12)
  nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,memory.used --format=csv > "$OUT/gpu.csv" 2>&1
fi
GPU=${GPU:-$DEVICE}
CARD=${CARD:-}
[ $# -gt 0 ] || set -- gpt2-vit whisper-convnext
for what in "$@"; do
  case $what in
    gpt2-vit)         run "$GPU-$(date +%F)-sealed-$SHARING-gpt2-vit" --set workloads=$F:make_gpt2_decode,$F:make_vit_train ;;
    whisper-convnext) run "$GPU-$(date +%F)-sealed-$SHARING-whisper-convnext" \
                        --set workloads=$F:make_whisper_decode,$F:make_convnext_train ;;
    gpt2-convnext)    run "$GPU-$(date +%F)-sealed-$SHARING-gpt2-convnext" \
                        --set workloads=$F:make_gpt2_decode,$F:make_convnext_train ;;
    whisper-vit)      run "$GPU-$(date +%F)-sealed-$SHARING-whisper-vit" --set workloads=$F:make_whisper_decode,$F:make_vit_train ;;
    llama-vit)        run "$GPU-$(date +%F)-sealed-$SHARING-llama-vit" --set workloads=llama-decode,$F:make_vit_train ;;
    gpt2-train)       run "$GPU-$(date +%F)-sealed-$SHARING-gpt2-train" --set workloads=$F:make_gpt2_decode,train-step ;;
    llama-convnext)   run "$GPU-$(date +%F)-sealed-$SHARING-llama-convnext" \
                        --set workloads=llama-decode,$F:make_convnext_train ;;
    whisper-train)    run "$GPU-$(date +%F)-sealed-$SHARING-whisper-train" --set workloads=$F:make_whisper_decode,train-step ;;
    llama-resnet)     run "$GPU-$(date +%F)-sealed-$SHARING-llama-resnet" --set workloads=llama-decode,resnet \
                        --set 'workload_params={"resnet": {"batch": 128}}' ;;
    gpt2-resnet)      run "$GPU-$(date +%F)-sealed-$SHARING-gpt2-resnet" --set workloads=$F:make_gpt2_decode,resnet \
                        --set 'workload_params={"resnet": {"batch": 128}}' ;;
    whisper-resnet)   run "$GPU-$(date +%F)-sealed-$SHARING-whisper-resnet" --set workloads=$F:make_whisper_decode,resnet \
                        --set 'workload_params={"resnet": {"batch": 128}}' ;;
    bert-resnet)      run "$GPU-$(date +%F)-sealed-$SHARING-bert-resnet" --set workloads=bert,resnet \
                        --set 'workload_params={"resnet": {"batch": 128}}' ;;
    gpt2-bert-resnet) run "$GPU-$(date +%F)-sealed-$SHARING-gpt2-bert-resnet" \
                        --set workloads=$F:make_gpt2_decode,bert,resnet ;;
    whisper-bert-resnet) run "$GPU-$(date +%F)-sealed-$SHARING-whisper-bert-resnet" \
                        --set workloads=$F:make_whisper_decode,bert,resnet ;;
    llama-bert-resnet) run "$GPU-$(date +%F)-sealed-$SHARING-llama-bert-resnet" \
                        --set workloads=llama-decode,bert,resnet ;;
    *) echo "unknown run $what" ;;
  esac
done
rmdir "$OUT/runs" 2>/dev/null || true
