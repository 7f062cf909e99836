#!/usr/bin/env bash
# The kit's Kubernetes path end to end on a kind cluster, with NVIDIA's mock GPU where no GPU exists.
#
#   manifests/kind/run-kind.sh                 (from anywhere; KEEP=1 keeps the cluster, LOG=<file> moves the log)
#
# NOT RUN BY THE KIT'S TESTS (they use an emulator, tests/k8s_fixtures.py), and never yet run where it was written:
# that machine has no route to a container registry (docker.io, registry.k8s.io, ghcr.io, nvcr.io). It needs docker,
# kind (>= 0.23: Kubernetes >= 1.30 for the ValidatingAdmissionPolicy of components/narrow-pod-patch), kubectl,
# helm (>= 3.8, OCI charts), python3 with this repository's venv (`make venv`), and those registries.
#
# What it sets up, each for real:
#   * a kind cluster: one control-plane node, one worker node (the GPU node);
#   * NVIDIA's mock NVML on the worker (NVIDIA/k8s-test-infra, chart nvml-mock: a libnvidia-ml.so that simulates one
#     H100; https://github.com/NVIDIA/k8s-test-infra), and the NVIDIA device plugin reading it (the DaemonSet of that
#     project's tests/e2e/device-plugin-mock.yaml) with the kit's own time-slicing config (ConfigMap
#     kts-time-slicing-config: replicas 4), so the node advertises nvidia.com/gpu: 4 as a real time-sliced node does;
#     GPU feature discovery is not run: its labels (nvidia.com/gpu.count, .replicas, .sharing-strategy) are set
#     by hand, as GFD would set them;
#   * manifests/kind: manifests/base (namespace, identities, RBAC, PriorityClasses) with the opt-in ConfigMap reader
#     (its Role in the plugin's namespace) and the policy narrowing `patch pods` to the go annotation; the kit runs
#     as the kts-runner ServiceAccount (its token);
#   * the worker image with CPU torch (the mock GPU runs no kernels: --worker-device cpu).
# Then `make k8s-smoke`, five times:
#   1. one tenant (fft): its baseline completes                                            -> exit 0
#   2. two tenants (fft, gemm): the baselines complete; the shared scenario runs its barrier, co-runs, stops its
#      padding on the kit's word, and then FAILS its one-GPU proof: CPU workers report no GPU UUID     -> exit 1
#   3. a stranger: a pod of namespace "them" holds a replica of the GPU; under the namespaced Role the kit cannot see
#      it, a pod of the scenario stays Pending, and the run ends within a minute naming who holds the replicas
#      ("... 1 by pod(s) not visible from namespace kts")                                                 -> exit 1
#   4. the same with the opt-in cluster-wide pod list (K8S_CLUSTER_POD_LIST): the kit sees the stranger before it
#      submits and waits for it; the stranger ends after 20 s and the baseline then runs               -> exit 0
#   5. a preemption: once the barrier is released, a pod of PriorityClass kts-kind-urgent (1000) asks for a replica:
#      kube-scheduler preempts a placeholder (kts-placeholder 0), never a tenant (kts-tenant 1), and the run names
#      the placeholder ("stopped holding its replica of the GPU (disrupted: the scheduler preempted it ...")  -> exit 1
# Everything is logged to $LOG (default manifests/kind/run-kind.log), which ends with one line per step:
#   "kind step <n> <name>: PASS|FAIL (exit <rc>, expected <rc>; <what was looked for>)".
# What it cannot show: anything a GPU does (timing, NVML memory, MPS), the device plugin's real allocation across GPUs.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
CLUSTER=${CLUSTER:-kts}
IMAGE=${IMAGE:-kts-worker:kind}
CTX=kind-$CLUSTER
NODE=$CLUSTER-worker
PY=${PY:-.venv/bin/python}
LOG=${LOG:-manifests/kind/run-kind.log}
PLUGIN_IMAGE=${PLUGIN_IMAGE:-nvcr.io/nvidia/k8s-device-plugin:v0.18.2}  # the version nvml-mock's e2e test runs
MOCK_CHART=${MOCK_CHART:-oci://ghcr.io/nvidia/k8s-test-infra/chart/nvml-mock}
MOCK_IMAGE=${MOCK_IMAGE:-ghcr.io/nvidia/nvml-mock:latest}
PLUGIN_NS=nvidia-device-plugin
: > "$LOG"
exec > >(tee -a "$LOG") 2>&1
RESULTS=()

need() { command -v "$1" >/dev/null || { echo "run-kind.sh: $1 is needed and not found"; exit 2; }; }
for tool in docker kind kubectl helm; do need "$tool"; done
[ -x "$PY" ] || { echo "run-kind.sh: $PY not found: make venv first"; exit 2; }
cleanup() {
  kubectl --context "$CTX" delete namespace them --wait=false >/dev/null 2>&1 || true
  [ "${KEEP:-0}" = 1 ] || kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
}
trap cleanup EXIT
k() { kubectl --context "$CTX" "$@"; }

# smoke <n> <name> <expected rc> <needle in the output, or ""> [VAR=value ...]: one `make k8s-smoke`, judged
smoke() {
  local n=$1 name=$2 want=$3 needle=$4; shift 4
  local out="manifests/kind/.step-$n.out" t0 rc verdict
  echo "== kind step $n: $name"
  t0=$(date +%s)
  env "$@" make k8s-smoke IMAGE="$IMAGE" K8S_CONTEXT=kts-kind K8S_WORKER_DEVICE=cpu \
    K8S_DEVICE_PLUGIN_CONFIG="$PLUGIN_NS/kts-time-slicing-config" 2>&1 | tee "$out"
  rc=${PIPESTATUS[0]}
  verdict=PASS
  [ "$rc" = "$want" ] || verdict=FAIL
  if [ -n "$needle" ] && ! grep -qE "$needle" "$out"; then verdict=FAIL; fi
  RESULTS+=("kind step $n $name: $verdict (exit $rc, expected $want; looked for: ${needle:-nothing}; $(( $(date +%s) - t0 )) s)")
  rm -f "$out"
}

echo "== a kind cluster: a control-plane node and a worker node (the GPU node)"
cat <<YAML | kind create cluster --name "$CLUSTER" --config - || exit 1
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
  - role: worker
YAML

echo "== NVIDIA's mock NVML on $NODE (one simulated H100), then the device plugin with the kit's time-slicing config"
docker pull "$MOCK_IMAGE" || exit 1
ARCH=$(uname -m | sed 's/x86_64/amd64/; s/aarch64/arm64/')
docker save --platform "linux/$ARCH" "$MOCK_IMAGE" -o /tmp/kts-nvml-mock.tar 2>/dev/null \
  || docker save "$MOCK_IMAGE" -o /tmp/kts-nvml-mock.tar
kind load image-archive /tmp/kts-nvml-mock.tar --name "$CLUSTER" || exit 1
helm --kube-context "$CTX" install nvml-mock "$MOCK_CHART" --set gpu.profile=h100 --set gpu.count=1 \
  --set "nodeSelector.kubernetes\.io/hostname=$NODE" --wait --timeout 180s || exit 1
k create namespace "$PLUGIN_NS" --dry-run=client -o yaml | k apply -f -
# the kit's own config (manifests/overlays/device-plugin-timeslicing, key "any"), in the plugin's namespace
"$PY" - "$PLUGIN_NS" <<'EOF' | k apply -f -
import subprocess, sys, yaml
docs = yaml.safe_load_all(subprocess.run(["kubectl", "kustomize", "manifests/overlays/device-plugin-timeslicing"],
                                         capture_output=True, text=True, check=True).stdout)
cm = next(d for d in docs if d and d["kind"] == "ConfigMap")
cm["metadata"]["namespace"] = sys.argv[1]
print(yaml.safe_dump(cm))
EOF
cat <<YAML | k apply -f -
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: nvidia-device-plugin-mock
  namespace: $PLUGIN_NS
spec:
  selector:
    matchLabels: {name: nvidia-device-plugin-mock}
  template:
    metadata:
      labels: {name: nvidia-device-plugin-mock}
    spec:
      nodeSelector: {nvidia.com/gpu.present: "true"}
      tolerations: [{operator: Exists}]
      containers:
        - name: nvidia-device-plugin
          image: $PLUGIN_IMAGE
          args:
            - --nvidia-driver-root=/var/lib/nvml-mock/driver
            - --driver-root-ctr-path=/var/lib/nvml-mock/driver
            - --device-discovery-strategy=nvml
            - --pass-device-specs=true
            - --config-file=/config/any
          securityContext: {privileged: true}
          volumeMounts:
            - {name: mock-root, mountPath: /var/lib/nvml-mock, readOnly: true}
            - {name: device-plugins, mountPath: /var/lib/kubelet/device-plugins}
            - {name: config, mountPath: /config, readOnly: true}
      volumes:
        - {name: mock-root, hostPath: {path: /var/lib/nvml-mock}}
        - {name: device-plugins, hostPath: {path: /var/lib/kubelet/device-plugins}}
        - {name: config, configMap: {name: kts-time-slicing-config}}
YAML
k -n "$PLUGIN_NS" rollout status daemonset/nvidia-device-plugin-mock --timeout=180s || exit 1
for _ in $(seq 1 60); do
  [ "$(k get node "$NODE" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}')" = 4 ] && break
  sleep 2
done
echo "$NODE advertises nvidia.com/gpu: $(k get node "$NODE" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}') (expected 4)"
# what GPU feature discovery would label (it is not run here)
k label node "$NODE" --overwrite nvidia.com/gpu.count=1 nvidia.com/gpu.replicas=4 \
  nvidia.com/gpu.sharing-strategy=time-slicing nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3-mock

echo "== the worker image (CPU torch) into the node"
docker build -f workers/Containerfile --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu \
  --build-arg TRANSFORMERS_VERSION= -t "$IMAGE" workers/ || exit 1
kind load docker-image "$IMAGE" --name "$CLUSTER" || exit 1

echo "== manifests/kind: base, the ConfigMap reader (Role in $PLUGIN_NS), the narrowed pod patch; the kit as kts-runner"
k apply -k manifests/kind || exit 1
k -n "$PLUGIN_NS" get role kts-device-plugin-config-reader >/dev/null || { echo "the Role left $PLUGIN_NS"; exit 1; }
TOKEN=$(k -n kts create token kts-runner --duration 2h)
kubectl config set-credentials kts-runner-kind --token "$TOKEN" >/dev/null
kubectl config set-context kts-kind --cluster "$CTX" --user kts-runner-kind --namespace kts >/dev/null

smoke 1 one-tenant 0 "run .*: complete" K8S_WORKLOADS=fft
smoke 2 two-tenants 1 "gpu_uuid|GPU UUID" K8S_WORKLOADS=fft,gemm

echo "== a stranger in namespace them holds a replica of $NODE's GPU"
k create namespace them --dry-run=client -o yaml | k apply -f -
stranger() {  # name, seconds to live
  cat <<YAML | k apply -f -
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: them}
spec:
  nodeName: $NODE
  restartPolicy: Never
  tolerations: [{operator: Exists}]
  containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources: {limits: {nvidia.com/gpu: "1"}}
  activeDeadlineSeconds: $2
YAML
}
stranger their-training 600
k -n them wait --for=condition=Ready pod/their-training --timeout=120s
smoke 3 stranger-unseen 1 "stayed Pending for [0-9]+ s: .*1 by pod\\(s\\) not visible from namespace kts" \
  K8S_WORKLOADS=fft
k -n them delete pod their-training --wait=true

echo "== the same, seen: the opt-in cluster-wide pod list (the kit waits for the stranger, which ends after 20 s)"
k apply -f manifests/components/cluster-pod-list/rbac.yaml
stranger their-short-job 20
smoke 4 stranger-seen 0 "runs other GPU pods \\(them/their-short-job" K8S_WORKLOADS=fft K8S_CLUSTER_POD_LIST=true
k delete -f manifests/components/cluster-pod-list/rbac.yaml --wait=false

echo "== a preemption: a pod of a higher PriorityClass asks for a replica once the barrier is released"
cat <<YAML | k apply -f -
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: kts-kind-urgent}
value: 1000
description: "run-kind.sh: a stranger above the kit's pods"
YAML
(
  for _ in $(seq 1 600); do  # the go annotation on a tenant pod: the barrier is released
    if k -n kts get pods -o json 2>/dev/null | "$PY" -c 'import json, sys
sys.exit(0 if any("kts/start-at" in (p["metadata"].get("annotations") or {}) for p in json.load(sys.stdin)["items"])
         else 1)'; then
      cat <<YAML | k apply -f -
apiVersion: v1
kind: Pod
metadata: {name: urgent-inference, namespace: them}
spec:
  priorityClassName: kts-kind-urgent
  restartPolicy: Never
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [$NODE]}]}]
  tolerations: [{operator: Exists}]
  containers:
    - name: main
      image: registry.k8s.io/pause:3.10
      resources: {limits: {nvidia.com/gpu: "1"}}
YAML
      exit 0
    fi
    sleep 0.5
  done
) &
PREEMPTOR=$!
smoke 5 preemption 1 "placeholder \\S+ of Job \\S+ stopped holding its replica of the GPU \\(disrupted: the scheduler preempted it" \
  K8S_WORKLOADS=fft
kill "$PREEMPTOR" 2>/dev/null
wait "$PREEMPTOR" 2>/dev/null
k -n them get pod urgent-inference -o wide || true

echo "== summary"
for line in "${RESULTS[@]}"; do echo "$line"; done
printf '%s\n' "${RESULTS[@]}" | grep -q ": FAIL" && exit 1
exit 0
