#!/usr/bin/env bash
# `make demo`: the reference scenario on the local cluster. Three tf-notebook Deployments of
# aliyun.com/gpu-mem: 4 share the real node's simulated Tesla T4 (14 GiB); a fourth cannot fit
# and stays Pending. Prints pods, each notebook's GPU environment, the pending reason and
# `kubectl inspect gpushare`, then leaves the cluster running. Safe to re-run.
# Expects `make build` (bin/) and hack/build-images.sh to have run (the Makefile does both).
#
# GPUSHARE_MODE=plugin (`make demo MODE=plugin`): gpushare-scheduler places the notebooks
# instead of kube-scheduler + the extender; the examples get schedulerName:
# gpushare-scheduler as they are applied (see hack/cluster-up.sh for the modes).
set -o errexit -o nounset -o pipefail

LOG_TAG=demo
# shellcheck source=hack/lib/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"

K8S_BIN=$(k8s_bin_dir)
GPUSHARE_K8S_BIN=$K8S_BIN "$REPO/hack/cluster-up.sh"
mode=$(cat "$STATE/node-mode")
sched_mode=$(cat "$STATE/scheduler-mode")
# kubectl finds the inspect plugin on PATH, as a user's does; a plugin takes no kubectl flags
# before its name, so the cluster comes from KUBECONFIG.
export PATH="$GPUSHARE_BIN:$PATH"
export KUBECONFIG=$KUBECONFIG_FILE
kubectl_plugin() {
  local kubectl
  kubectl=$(tool_path kubectl) || return 1
  "$kubectl" "$@"
}
node=$(node_name)

banner() { printf '\n=== %s\n' "$*"; }

if [ "$mode" = kwok ]; then
  # No kubelet here: a kwok node with the T4's shape stands in for the real node.
  node=gpushare-t4
  kubectl_ apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
  annotations: {kwok.x-k8s.io/node: fake}
  labels: {cgpu: "true", $REAL_NODE_LABEL: "true", kubernetes.io/hostname: $node, type: kwok}
status:
  capacity: {cpu: "8", memory: 32Gi, pods: "110", aliyun.com/gpu-mem: "14", aliyun.com/gpu-count: "1"}
  allocatable: {cpu: "8", memory: 32Gi, pods: "110", aliyun.com/gpu-mem: "14", aliyun.com/gpu-count: "1"}
EOF
fi

# apply_examples DIR: kubectl apply of DIR's manifests; in plugin mode each Deployment's pod
# template first gets schedulerName: gpushare-scheduler (the only scheduler there that places
# cards). The manifests stay scheduler-neutral, as users apply them.
apply_examples() {
  if [ "$sched_mode" != plugin ]; then
    kubectl_ apply -f "$1" >/dev/null
    return
  fi
  local rendered deployments named
  rendered=$(for f in "$1"/*.yaml; do
    sed 's/^    spec:$/    spec:\n      schedulerName: gpushare-scheduler/' "$f"
    echo ---
  done)
  # Fail closed: a Deployment the expression missed would go to the default scheduler,
  # which binds without choosing a card.
  deployments=$(grep -c '^kind: Deployment$' <<<"$rendered" || true)
  named=$(grep -c '^      schedulerName: gpushare-scheduler$' <<<"$rendered" || true)
  { [ "$deployments" -gt 0 ] && [ "$deployments" = "$named" ]; } ||
    die "could not set schedulerName in $1 ($named of $deployments Deployments)"
  kubectl_ apply -f - >/dev/null <<<"$rendered"
}

apply_examples "$REPO/deploy/examples"
log "waiting for tf-notebook, tf-notebook-2, tf-notebook-3 to be Available"
if ! kubectl_ wait --for=condition=Available --timeout=180s deployment/tf-notebook deployment/tf-notebook-2 deployment/tf-notebook-3 >/dev/null; then
  kubectl_ get pods -o wide
  kubectl_ get events --field-selector type=Warning | tail -n 20
  die "the notebooks did not become Available; logs: $LOGS"
fi
# Only now the one that cannot fit, so it is the one left Pending.
apply_examples "$REPO/deploy/examples/overflow"
pending_reason() {
  local pod
  pod=$(kubectl_ get pods -l app=tf-notebook-4 -o 'jsonpath={.items[0].metadata.name}' 2>/dev/null) || return 1
  kubectl_ get events --field-selector "involvedObject.name=$pod,reason=FailedScheduling" \
    -o 'jsonpath={.items[-1:].message}' 2>/dev/null | grep .
}
wait_for "tf-notebook-4's FailedScheduling event" 60 pending_reason || true

banner "kubectl get pods -o wide"
kubectl_ get pods -o wide

banner "GPU environment of each notebook (kubectl logs)"
for d in tf-notebook tf-notebook-2 tf-notebook-3; do
  pod=$(kubectl_ get pods -l "app=$d" -o 'jsonpath={.items[0].metadata.name}')
  if [ "$mode" = real ]; then
    kubectl_ logs "$pod" | grep -E '^(NVIDIA_VISIBLE_DEVICES|ALIYUN_COM_GPU_MEM_)' | sed "s/^/$pod: /" || echo "$pod: (no GPU env in log)"
  else
    echo "$pod: (kwok node, no container runs) card annotation ALIYUN_COM_GPU_MEM_IDX=$(kubectl_ get pod "$pod" -o 'jsonpath={.metadata.annotations.ALIYUN_COM_GPU_MEM_IDX}')"
  fi
done

banner "Why tf-notebook-4 is Pending"
pending_reason || echo "(no FailedScheduling event yet)"

banner "kubectl inspect gpushare"
if [ -x "$GPUSHARE_BIN/kubectl-inspect-gpushare" ]; then
  kubectl_plugin inspect gpushare
  banner "kubectl inspect gpushare $node"
  kubectl_plugin inspect gpushare "$node" || true
elif [ "$sched_mode" = plugin ]; then
  log "bin/kubectl-inspect-gpushare not built (make build)"
else
  log "bin/kubectl-inspect-gpushare not built; the extender's inspect JSON instead"
  curl -sf --cacert "$EXTENDER_PKI/ca.crt" --cert "$EXTENDER_PKI/client.crt" --key "$EXTENDER_PKI/client.key" \
    "https://127.0.0.1:$EXTENDER_DIAGNOSTICS_PORT/gpushare-scheduler/inspect/$node" || echo "(extender not reachable)"
  echo
fi

banner "The cluster keeps running; stop it with: make demo-down"
echo "export KUBECONFIG=$KUBECONFIG_FILE"
