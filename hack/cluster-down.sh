#!/usr/bin/env bash
# Stops the local gpushare cluster of $GPUSHARE_STATE_DIR (default _output/cluster): every
# process hack/cluster-up.sh started, by recorded PID; pods of the real node through kubelet,
# then leftover CRI tasks, mounts, the cni0 bridge, host-local addresses and kubepods cgroups.
# Keeps logs/ and pki/ for a look afterwards; etcd data is removed. Safe to run twice.
set -o errexit -o nounset -o pipefail

LOG_TAG=cluster-down
# shellcheck source=hack/lib/cluster.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/cluster.sh"
# shellcheck source=hack/lib/realnode.sh
source "$REPO/hack/lib/realnode.sh"

if [ ! -d "$STATE" ]; then
  log "no cluster state in $STATE"
  exit 0
fi
# The binaries the cluster was started with; none recorded: nothing of the real node runs.
K8S_BIN=${GPUSHARE_K8S_BIN:-$(cat "$STATE/k8s-bin" 2>/dev/null || true)}

# No new bindings while the real node is drained.
stop_proc kube-scheduler
stop_proc gpushare-scheduler
stop_proc extender
if [ -n "$K8S_BIN" ] && tool_path kubectl >/dev/null 2>&1; then
  drain_real_node
fi
stop_proc share-plugin
stop_proc kubelet
stop_proc kwok
stop_proc kube-controller-manager
stop_proc kube-apiserver
stop_proc etcd
if [ -f "$CONTAINERD_DIR/config.toml" ] || is_running containerd; then
  cleanup_runtime
  release_real_node
fi
rm -rf "$STATE/etcd"
# The next hack/cluster-up.sh starts in the mode it is given (default extender), not this one.
rm -f "$STATE/scheduler-mode" "$STATE/backend"
left=()
for f in "$PIDS"/*; do
  [ -e "$f" ] && [[ $f != *.* ]] && left+=("${f##*/}")
done
[ ${#left[@]} -eq 0 ] || log "WARNING: pid files left: ${left[*]}"
log "cluster in $STATE stopped"
