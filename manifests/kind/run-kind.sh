#!/usr/bin/env bash
# The kit's Kubernetes path on a kind cluster, with a fake nvidia.com/gpu resource (no GPU needed).
#
# NOT RUN BY THE KIT'S TESTS, AND NOT RUN WHERE THIS SCRIPT WAS WRITTEN (no Docker, no kind there): it is for
# users who have both. The kit's own tests use an emulator (tests/k8s_fixtures.py); this script puts the same
# path in front of a real API server, kube-scheduler, Job controller and kubelet:
#   * RBAC as manifests/base grants it (the kit runs as the kts-runner ServiceAccount, its token);
#   * scheduling of the Indexed Job, its placeholders and the start barrier (a pod annotation read through a
#     downwardAPI volume: the real kubelet's go latency is printed in each scenario's record);
#   * the node Lease, log streaming, clean-up;
#   * a foreign "GPU" pod in another namespace: the run must end within a minute naming the Pending placeholder.
# What it cannot show: anything of a GPU. The node advertises 4 replicas of a GPU that does not exist (patched
# into its status as an extended resource, https://kubernetes.io/docs/tasks/administer-cluster/extended-resource-node/),
# the workers run on CPU (--worker-device cpu), so there is no GPU UUID: every shared scenario FAILS its one-GPU
# proof ("gpu_uuid" missing), as it must. Baselines complete. No device plugin, no MPS, no dcgm-exporter.
#
# Needs: docker, kind (>= 0.20), kubectl, curl, and this repository's venv (make venv).
# Usage: manifests/kind/run-kind.sh            (KEEP=1 keeps the cluster afterwards)
set -euo pipefail
cd "$(dirname "$0")/../.."
CLUSTER=${CLUSTER:-kts}
IMAGE=${IMAGE:-kts-worker:kind}
CTX=kind-$CLUSTER
PY=${PY:-.venv/bin/python}

cleanup() { [ "${KEEP:-0}" = 1 ] || kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "== a kind cluster with one worker node"
cat <<YAML | kind create cluster --name "$CLUSTER" --config -
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
YAML
NODE=$CLUSTER-worker

echo "== a fake GPU: 4 replicas of nvidia.com/gpu on $NODE, and the labels GPU feature discovery would set"
kubectl --context "$CTX" proxy --port 8011 >/dev/null 2>&1 &
PROXY=$!
sleep 2
for field in capacity allocatable; do
  curl -sf -H 'Content-Type: application/json-patch+json' -X PATCH \
    --data "[{\"op\": \"add\", \"path\": \"/status/$field/nvidia.com~1gpu\", \"value\": \"4\"}]" \
    "http://127.0.0.1:8011/api/v1/nodes/$NODE/status" >/dev/null
done
kill "$PROXY"
kubectl --context "$CTX" label node "$NODE" --overwrite nvidia.com/gpu.count=1 nvidia.com/gpu.replicas=4 \
  nvidia.com/gpu.sharing-strategy=time-slicing nvidia.com/gpu.product=fake-gpu

echo "== the worker image (CPU torch) into the node"
docker build -f workers/Containerfile --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu \
  --build-arg TRANSFORMERS_VERSION= -t "$IMAGE" workers/
kind load docker-image "$IMAGE" --name "$CLUSTER"

echo "== namespace and least-privilege RBAC; the kit runs as kts-runner"
kubectl --context "$CTX" apply -k manifests/base
TOKEN=$(kubectl --context "$CTX" -n kts create token kts-runner --duration 2h)
kubectl config set-credentials kts-runner-kind --token "$TOKEN" >/dev/null
kubectl config set-context kts-kind --cluster "$CTX" --user kts-runner-kind --namespace kts >/dev/null

echo "== 1. the tiny experiment: baselines complete; the shared scenario must fail its one-GPU proof (no GPU UUID)"
set +e
$PY -m kts_helpers.k8s_smoke --context kts-kind --image "$IMAGE" --worker-device cpu --timeout 300
rc=$?
set -e
echo "k8s_smoke exit $rc (1 expected: 'gpu_uuid' missing in the shared scenario; anything earlier is a finding)"

echo "== 2. a foreign GPU pod in another namespace holds a replica: the run must end within a minute, naming the"
echo "      Pending placeholder ('Insufficient nvidia.com/gpu')"
kubectl --context "$CTX" create namespace them --dry-run=client -o yaml | kubectl --context "$CTX" apply -f -
cat <<YAML | kubectl --context "$CTX" apply -f -
apiVersion: v1
kind: Pod
metadata: {name: their-training, namespace: them}
spec:
  nodeName: $NODE
  containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources: {limits: {nvidia.com/gpu: "1"}}
YAML
set +e
start=$(date +%s)
$PY -m kts_helpers.k8s_smoke --context kts-kind --image "$IMAGE" --worker-device cpu --timeout 300 --workloads fft,gemm
rc=$?
echo "k8s_smoke exit $rc after $(( $(date +%s) - start )) s (expected: non-zero, a placeholder named, well under 30 min)"
set -e
kubectl --context "$CTX" delete namespace them --wait=false
