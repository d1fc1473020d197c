#!/usr/bin/env bash
# `make demo`: the reference scenario on the local cluster. Three 4 GiB notebooks share the
# real node's simulated Tesla T4 (14 GiB); a fourth cannot fit and stays Pending. Prints pods,
# each notebook's GPU environment, the pending reason and `kubectl inspect gpushare`, then
# leaves the cluster running and prints the two exports that make `kubectl inspect gpushare`
# work in the user's own shell. Safe to re-run: each run deletes the notebooks of the run
# before and starts them again, so every run prints the same result.
# Expects `make build` (bin/) and hack/build-images.sh to have run (the Makefile does both).
#
# GPUSHARE_MODE=plugin (`make demo MODE=plugin`): gpushare-scheduler places the notebooks
# instead of kube-scheduler + the extender; the examples get schedulerName:
# gpushare-scheduler as they are applied (see hack/cluster-up.sh for the modes).
# GPUSHARE_BACKEND=dra (`make demo BACKEND=dra`): share-plugin serves the card as a DRA
# driver and the notebooks ask through ResourceClaims (deploy/dra/examples): the Deployment
# scaled to three, then to four.
set -o errexit -o nounset -o pipefail

LOG_TAG=demo
# shellcheck source=hack/lib/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"

# The notebooks of either back end (Deployments in namespace default); each run deletes
# them before it applies its own.
DP_NOTEBOOKS=("$REPO/deploy/examples/tf-notebook.yaml" "$REPO/deploy/examples/overflow/tf-notebook-4.yaml")
DRA_NOTEBOOKS=("$REPO/deploy/dra/examples/tf-notebook-claims.yaml")
# Where the demo links the pinned kubectl and the inspect plugin for the user's PATH.
USER_BIN=$STATE/bin

banner() { printf '\n=== %s\n' "$*"; }

# link_user_tools puts the pinned kubectl and kubectl-inspect-gpushare into $USER_BIN, the
# folder the demo asks the user to put first on PATH: kubectl finds plugins on PATH, and a
# machine need not have a kubectl of its own.
link_user_tools() {
  mkdir -p "$USER_BIN"
  ln -sfn "$(tool_path kubectl)" "$USER_BIN/kubectl"
  if [ -x "$GPUSHARE_BIN/kubectl-inspect-gpushare" ]; then
    ln -sfn "$GPUSHARE_BIN/kubectl-inspect-gpushare" "$USER_BIN/kubectl-inspect-gpushare"
  fi
}

# user_kubectl runs kubectl as the user's shell does after the printed exports: the linked
# kubectl, which finds the plugin on PATH; a plugin takes no kubectl flags before its name,
# so the cluster comes from KUBECONFIG.
user_kubectl() { PATH="$USER_BIN:$PATH" KUBECONFIG=$KUBECONFIG_FILE "$USER_BIN/kubectl" "$@"; }

# add_kwok_t4 stands a kwok node with the T4's shape in for the real node (no kubelet here).
add_kwok_t4() {
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
}

# remove_notebooks deletes the notebooks of an earlier run (either back end, either mode) and
# waits until their pods and generated ResourceClaims are gone, so this run starts on an
# empty card.
remove_notebooks() {
  local f args=()
  for f in "${DP_NOTEBOOKS[@]}" "${DRA_NOTEBOOKS[@]}"; do args+=(-f "$f"); done
  kubectl_ delete "${args[@]}" --ignore-not-found --cascade=foreground --wait --timeout=120s >/dev/null ||
    die "could not delete the notebooks of the last run; kubectl get pods -o wide shows what is left"
  wait_for "the notebooks' pods to go" 120 no_notebook_pods ||
    die "the notebooks of the last run are still there; logs: $LOGS"
  wait_for "the notebooks' ResourceClaims to go" 60 no_notebook_claims ||
    die "the ResourceClaims of the last run's notebooks are still there; logs: $LOGS"
}

no_notebook_pods() {
  [ -z "$(kubectl_ get pods -l 'app in (tf-notebook,tf-notebook-2,tf-notebook-3,tf-notebook-4)' -o name 2>/dev/null)" ]
}

no_notebook_claims() {
  ! kubectl_ get resourceclaims -o 'jsonpath={range .items[*]}{.metadata.ownerReferences[0].name}{"\n"}{end}' 2>/dev/null |
    grep -q '^tf-notebook'
}

# apply_examples FILE...: kubectl apply of the manifests; in plugin mode each Deployment's pod
# template first gets schedulerName: gpushare-scheduler (the only scheduler there that places
# cards). The manifests stay scheduler-neutral, as users apply them.
apply_examples() {
  local f args=()
  if [ "$sched_mode" != plugin ]; then
    for f in "$@"; do args+=(-f "$f"); done
    kubectl_ apply "${args[@]}" >/dev/null
    return
  fi
  local rendered deployments named
  rendered=$(for f in "$@"; do
    sed 's/^    spec:$/    spec:\n      schedulerName: gpushare-scheduler/' "$f"
    echo ---
  done)
  # Fail closed: a Deployment the expression missed would go to the default scheduler,
  # which binds without choosing a card.
  deployments=$(grep -c '^kind: Deployment$' <<<"$rendered" || true)
  named=$(grep -c '^      schedulerName: gpushare-scheduler$' <<<"$rendered" || true)
  { [ "$deployments" -gt 0 ] && [ "$deployments" = "$named" ]; } ||
    die "could not set schedulerName in $* ($named of $deployments Deployments)"
  kubectl_ apply -f - >/dev/null <<<"$rendered"
}

# not_ready DESCRIPTION: prints what the cluster shows and fails.
not_ready() {
  kubectl_ get pods -o wide
  kubectl_ get events --field-selector type=Warning | tail -n 20
  die "$1; logs: $LOGS"
}

# run_device_plugin_notebooks: deploy/examples (the three notebooks and the namespace quota
# example), then the fourth notebook once the three are Available.
run_device_plugin_notebooks() {
  apply_examples "$REPO"/deploy/examples/*.yaml
  log "waiting for tf-notebook, tf-notebook-2, tf-notebook-3 to be Available"
  kubectl_ wait --for=condition=Available --timeout=180s \
    deployment/tf-notebook deployment/tf-notebook-2 deployment/tf-notebook-3 >/dev/null ||
    not_ready "the notebooks did not become Available"
  # Only now the one that cannot fit, so it is the one left Pending.
  apply_examples "$REPO/deploy/examples/overflow/tf-notebook-4.yaml"
}

# run_dra_notebooks: the claim notebook Deployment, scaled to three replicas (each pod gets
# its own 4 GiB claim from the template), then to four.
run_dra_notebooks() {
  apply_examples "${DRA_NOTEBOOKS[@]}"
  kubectl_ scale deployment/tf-notebook --replicas=3 >/dev/null
  log "waiting for three tf-notebook replicas to be Ready"
  kubectl_ wait --for=jsonpath='{.status.readyReplicas}'=3 --timeout=180s deployment/tf-notebook >/dev/null ||
    not_ready "three tf-notebook replicas did not become Ready"
  kubectl_ scale deployment/tf-notebook --replicas=4 >/dev/null
}

# pending_pod prints the name of the notebook pod no node took.
pending_pod() {
  kubectl_ get pods -l 'app in (tf-notebook,tf-notebook-4)' --field-selector spec.nodeName= \
    -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}' 2>/dev/null | grep -m1 .
}

# pending_reason prints the pending notebook's last FailedScheduling message.
pending_reason() {
  local pod
  pod=$(pending_pod) || return 1
  kubectl_ get events --field-selector "involvedObject.name=$pod,reason=FailedScheduling" \
    -o 'jsonpath={.items[-1:].message}' 2>/dev/null | grep .
}

# print_gpu_env prints, for each Running notebook, the GPU variables its container was given.
print_gpu_env() {
  local pod
  for pod in $(kubectl_ get pods -l 'app in (tf-notebook,tf-notebook-2,tf-notebook-3)' \
    --field-selector status.phase=Running -o 'jsonpath={.items[*].metadata.name}'); do
    if [ "$mode" = real ]; then
      kubectl_ logs "$pod" | grep -E '^(NVIDIA_VISIBLE_DEVICES|ALIYUN_COM_GPU_MEM_)' | sed "s/^/$pod: /" ||
        echo "$pod: (no GPU env in log)"
    else
      echo "$pod: (kwok node, no container runs) card annotation ALIYUN_COM_GPU_MEM_IDX=$(kubectl_ get pod "$pod" -o 'jsonpath={.metadata.annotations.ALIYUN_COM_GPU_MEM_IDX}')"
    fi
  done
}

print_inspect() {
  if [ -e "$USER_BIN/kubectl-inspect-gpushare" ]; then
    banner "kubectl inspect gpushare"
    user_kubectl inspect gpushare
    banner "kubectl inspect gpushare $node"
    user_kubectl inspect gpushare "$node"
    return
  fi
  log "bin/kubectl-inspect-gpushare not built (make build)"
  if [ "$sched_mode" != plugin ] && [ "$BACKEND" != dra ]; then
    banner "the extender's inspect JSON (no kubectl-inspect-gpushare)"
    curl -sf --cacert "$EXTENDER_PKI/ca.crt" --cert "$EXTENDER_PKI/client.crt" --key "$EXTENDER_PKI/client.key" \
      "https://127.0.0.1:$EXTENDER_DIAGNOSTICS_PORT/gpushare-scheduler/inspect/$node" || echo "(extender not reachable)"
    echo
  fi
}

K8S_BIN=$(k8s_bin_dir)
# The last run's notebooks go first, while the back end that granted them still runs: a DRA
# claim is unprepared only by the DRA plugin, and cluster-up switches back ends only once no
# pod holds memory through the old one.
if is_running kube-apiserver && is_running kube-controller-manager; then
  remove_notebooks
fi
GPUSHARE_K8S_BIN=$K8S_BIN "$REPO/hack/cluster-up.sh"
mode=$(cat "$STATE/node-mode")
sched_mode=$(cat "$STATE/scheduler-mode")
node=$(node_name)
if [ "$BACKEND" = dra ] && [ "$mode" != real ]; then
  die "the DRA demo needs the real node (root and hack/doctor.sh's node packages); this cluster runs kwok nodes only"
fi

[ "$mode" = kwok ] && add_kwok_t4
link_user_tools
remove_notebooks
if [ "$BACKEND" = dra ]; then
  run_dra_notebooks
else
  run_device_plugin_notebooks
fi
wait_for "the fourth notebook's FailedScheduling event" 60 pending_reason || true

banner "kubectl get pods -o wide"
kubectl_ get pods -o wide

banner "GPU environment of each notebook (kubectl logs)"
print_gpu_env

pod=$(pending_pod || echo "the fourth notebook")
banner "Why $pod is Pending"
pending_reason || echo "(no FailedScheduling event yet)"

print_inspect

banner "The cluster keeps running ($sched_mode mode, $BACKEND back end); stop it with: make demo-down"
echo "# kubectl and the inspect plugin, pinned and built by this project, are linked in $USER_BIN."
echo "# In a new shell, use the cluster with:"
echo "export KUBECONFIG=$KUBECONFIG_FILE"
# shellcheck disable=SC2016 # $PATH is for the user's shell to expand
echo 'export PATH='"$USER_BIN"':$PATH'
