#!/usr/bin/env bash
# Starts the local gpushare cluster on 127.0.0.1: etcd, kube-apiserver (with deploy/admission's
# admission policies), kube-controller-manager, kube-scheduler, the gpushare extender and/or
# gpushare-scheduler (GPUSHARE_MODE, below), kwok with GPU-shaped fake nodes and, when root and
# containerd are available, one real node (containerd + kubelet + share-plugin simulating a
# Tesla T4).
#
#   hack/cluster-up.sh                         # start whatever is not running yet (safe to re-run)
#   hack/cluster-up.sh extender                # (re)start only the named components
#   hack/cluster-up.sh admission               # re-apply deploy/admission's policies
#   GPUSHARE_MODE=plugin hack/cluster-up.sh    # gpushare-scheduler instead of the extender
#
# GPUSHARE_MODE: extender (kube-scheduler with deploy/scheduler's extender config, and the
# extender), plugin (kube-scheduler without the extenders: section, no extender, and
# gpushare-scheduler with deploy/gpushare-scheduler's config: pods opt in with
# schedulerName: gpushare-scheduler) or both (extender mode plus gpushare-scheduler). Unset: the
# running cluster's mode, else extender. Recorded in $STATE/scheduler-mode; switching the mode
# of a running cluster restarts the schedulers and the extender.
#
# State (PIDs, logs, credentials, kubeconfig): $GPUSHARE_STATE_DIR (default _output/cluster).
# Ports and modes: see hack/lib/cluster.sh and docs/local-cluster.md.
set -o errexit -o nounset -o pipefail

LOG_TAG=cluster-up
# shellcheck source=hack/lib/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
# shellcheck source=hack/lib/certs.sh
source "$REPO/hack/lib/certs.sh"
# shellcheck source=hack/lib/realnode.sh
source "$REPO/hack/lib/realnode.sh"
# shellcheck source=hack/lib/controlplane.sh
source "$REPO/hack/lib/controlplane.sh"

K8S_BIN=$(k8s_bin_dir)
tool_path kube-apiserver >/dev/null || die "no Kubernetes binaries in $K8S_BIN"
mkdir -p "$STATE" "$PIDS" "$LOGS"
echo "$K8S_BIN" >"$STATE/k8s-bin"

install_packages
case $NODE_MODE in
real | kwok) ;;
auto)
  if why=$(real_node_possible); then
    NODE_MODE=real
  else
    log "no real node: $why; running the kwok-only variant"
    NODE_MODE=kwok
  fi
  ;;
*) die "GPUSHARE_NODE_MODE=$NODE_MODE: want real, kwok or auto" ;;
esac
if [ "$NODE_MODE" = real ]; then
  why=$(real_node_possible) || die "GPUSHARE_NODE_MODE=real but $why"
fi
echo "$NODE_MODE" >"$STATE/node-mode"

CLUSTER_MODE=$(cluster_mode) || exit 1
prev_mode=$(cat "$STATE/scheduler-mode" 2>/dev/null || true)
all=(etcd kube-apiserver kube-controller-manager kube-scheduler)
case $CLUSTER_MODE in
extender) all+=(extender) ;;
plugin) all+=(gpushare-scheduler) ;;
both) all+=(extender gpushare-scheduler) ;;
esac
all+=(kwok)
[ "$NODE_MODE" = real ] && all+=(containerd kubelet share-plugin)
if [ $# -gt 0 ]; then components=("$@"); else components=("${all[@]}"); fi
if [ -n "$prev_mode" ] && [ "$prev_mode" != "$CLUSTER_MODE" ]; then
  # kube-scheduler's rendered configuration depends on the mode, and is_running would keep the
  # old one: stop what differs between modes, and start it below as the new mode wants.
  [ $# -eq 0 ] || die "the cluster in $STATE runs in $prev_mode mode; switch to $CLUSTER_MODE with a full hack/cluster-up.sh (no component names)"
  log "scheduler mode $prev_mode -> $CLUSTER_MODE: restarting the schedulers"
  stop_proc kube-scheduler
  stop_proc extender
  stop_proc gpushare-scheduler
fi
echo "$CLUSTER_MODE" >"$STATE/scheduler-mode"

[ "$NODE_MODE" = real ] && claim_real_node
ensure_credentials

for c in "${components[@]}"; do
  case $c in
  etcd) start_etcd ;;
  kube-apiserver)
    start_apiserver
    apply_admission_policies
    ;;
  admission) apply_admission_policies ;;
  kube-controller-manager) start_controller_manager ;;
  kube-scheduler) start_scheduler_for_mode "$CLUSTER_MODE" ;;
  extender) start_extender ;;
  gpushare-scheduler) start_gpushare_scheduler "$REPO/deploy/gpushare-scheduler/scheduler-config.yaml" ;;
  kwok) start_kwok ;;
  containerd) start_containerd ;;
  kubelet) start_kubelet ;;
  share-plugin) start_gpu_source ;;
  *) die "unknown component $c (known: ${all[*]})" ;;
  esac
done

wait_for "namespace default's service account" 60 kubectl_ get serviceaccount default -n default ||
  die "kube-controller-manager did not create the default service account; see $LOGS/kube-controller-manager.log"

log "cluster up ($NODE_MODE nodes, $CLUSTER_MODE mode); logs in $LOGS"
echo "export KUBECONFIG=$KUBECONFIG_FILE"
