# Shared settings and helpers of hack/cluster-up.sh, hack/cluster-down.sh and hack/demo.sh.
# Sourced, not run. Every setting can be overridden from the environment so the e2e suite can
# run its own cluster in its own state dir (see docs/local-cluster.md).
# shellcheck shell=bash
# shellcheck disable=SC2034 # settings used by the scripts that source this file

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${GPUSHARE_STATE_DIR:-$REPO/_output/cluster}
IMAGES_DIR=${GPUSHARE_IMAGES_DIR:-$REPO/_output/images}
GPUSHARE_BIN=${GPUSHARE_BIN:-$REPO/bin}

# shellcheck source=hack/lib/ports.sh
source "$REPO/hack/lib/ports.sh"
# shellcheck source=hack/lib/bins.sh
source "$REPO/hack/lib/bins.sh"
# shellcheck source=hack/lib/prereqs.sh
source "$REPO/hack/lib/prereqs.sh"
# The local cluster runs binpack, not the product's default fgd: the e2e cases check card
# choices that binpack makes the same way whatever pods came before
# (GPUSHARE_EXTENDER_POLICY=fgd make demo shows fgd).
EXTENDER_POLICY=${GPUSHARE_EXTENDER_POLICY:-binpack}
# The GPUShare plugin's policy in gpushare-scheduler (its args' policy:); the extender's by default.
PLUGIN_POLICY=${GPUSHARE_PLUGIN_POLICY:-$EXTENDER_POLICY}
# Who places GPU-sharing pods: extender (kube-scheduler calls the gpushare extender), plugin
# (gpushare-scheduler, a second scheduler pods opt into with schedulerName; kube-scheduler
# runs without the extender, which is not started) or both (extender mode plus
# gpushare-scheduler; the e2e suite's set-up). Empty: the mode recorded in $STATE/scheduler-mode
# by the last hack/cluster-up.sh, else extender (see cluster_mode).
CLUSTER_MODE=${GPUSHARE_MODE:-}
# The extender's kubeconfig; e2e points it at a proxy that delays Binding writes.
EXTENDER_KUBECONFIG=${GPUSHARE_EXTENDER_KUBECONFIG:-}
# real | kwok | auto (real when root and containerd are available).
NODE_MODE=${GPUSHARE_NODE_MODE:-auto}
# Preset kwok nodes from hack/kwok-nodes.yaml: "yes" or "no" (the e2e suite makes its own).
KWOK_NODES=${GPUSHARE_KWOK_NODES:-yes}
SIMULATE=${GPUSHARE_SIMULATE:-t4}
# How the real node's share-plugin hands cards over: envvar (NVIDIA_VISIBLE_DEVICES), cdi-cri
# (CDI device names; share-plugin writes the simulated cards' CDI spec into $CDI_DIR, which
# the node's containerd reads) or cdi-allocation (one CDI spec per container in $CDI_DIR,
# whose variables a pod's own env cannot override).
DEVICE_LIST_STRATEGY=${GPUSHARE_DEVICE_LIST_STRATEGY:-envvar}

# Which back end share-plugin serves the real node's card with: device-plugin (the
# aliyun.com/gpu-mem extended resource) or dra (ResourceSlices; pods ask through
# ResourceClaims, docs/dra.md). Not inherited from the running cluster: unset means
# device-plugin, and switching a running node's back end deletes its pods first
# (start_gpu_source). Recorded in $STATE/backend.
BACKEND=${GPUSHARE_BACKEND:-device-plugin}
case $BACKEND in
device-plugin | dra) ;;
*)
  printf 'GPUSHARE_BACKEND=%s: want device-plugin or dra\n' "$BACKEND" >&2
  exit 2
  ;;
esac
# The node label that names a node's back end, and the DRA driver's name (pkg/gpushare).
BACKEND_LABEL=gpushare.io/backend
DRA_DRIVER=gpu-mem.gpushare.io

# The real node exists once per machine: kubelet's ports and its device-plugin folder
# (/var/lib/kubelet/device-plugins is compiled into kubelet) cannot be moved, so whichever
# state dir holds this lock owns the real node.
KUBELET_DIR=/var/lib/kubelet
REAL_NODE_LOCK=/run/gpushare-real-node
OWNER_MARK=$KUBELET_DIR/.gpushare-owner

CONTAINERD_DIR=$STATE/containerd
CONTAINERD_SOCK=$CONTAINERD_DIR/containerd.sock
# CDI specs of the real node: share-plugin writes the simulated cards' spec here.
CDI_DIR=$STATE/cdi
# The NVIDIA container runtime configuration the real node's share-plugin reads
# (write_runtime_config).
RUNTIME_CONFIG=$STATE/nvidia-container-runtime/config.toml
CNI_NETWORK=gpushare
CNI_BRIDGE=cni0
CNI_SUBNET=10.88.0.0/16

IMAGE_GPUENV=gpushare.local/gpuenv:v1
IMAGE_PAUSE=gpushare.local/pause:v1
REAL_NODE_LABEL=demo.gpushare.io/real-node

KUBECONFIG_FILE=$STATE/kubeconfig
# The extender's CA, serving certificate and client certificates (hack/lib/certs.sh).
EXTENDER_PKI=$STATE/pki/extender
PIDS=$STATE/pids
LOGS=$STATE/logs

log() { printf '[%s %s] %s\n' "${LOG_TAG:-cluster}" "$(date +%T)" "$*" >&2; }

# alive PID: the process exists and is not a zombie waiting for its parent.
alive() {
  kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
die() {
  log "ERROR: $*"
  exit 1
}

# cluster_mode prints the scheduler mode of the cluster in $STATE: GPUSHARE_MODE when set,
# else the one hack/cluster-up.sh recorded, else extender. Fails on an unknown mode.
cluster_mode() {
  local m=$CLUSTER_MODE
  if [ -z "$m" ]; then
    m=$(cat "$STATE/scheduler-mode" 2>/dev/null || echo extender)
  fi
  case $m in
  extender | plugin | both) echo "$m" ;;
  *)
    log "ERROR: scheduler mode '$m': want extender, plugin or both"
    return 1
    ;;
  esac
}

# node_name is the name the real node registers: the lower-cased host name when it resolves to
# a loopback address (the apiserver reaches kubelet, which listens on 127.0.0.1 only, by that
# name: kubelet refuses a loopback --node-ip), else "localhost". GPUSHARE_NODE_NAME overrides
# (it must resolve to 127.0.0.1).
node_name() {
  if [ -n "${GPUSHARE_NODE_NAME:-}" ]; then
    echo "$GPUSHARE_NODE_NAME"
    return
  fi
  local h
  h=$(hostname | tr '[:upper:]' '[:lower:]')
  if [ -n "$(getent ahostsv4 "$h" 2>/dev/null | awk '$1 ~ /^127\./')" ]; then
    echo "$h"
  else
    echo localhost
  fi
}

# real_node_possible says (exit status) whether this machine can run the real node, and prints
# why not.
real_node_possible() {
  if [ "$(id -u)" != 0 ]; then
    echo "not root"
    return 1
  fi
  local missing
  missing=$(missing_packages node | tr '\n' ' ')
  if [ -n "$missing" ]; then
    echo "not installed: ${missing% } (hack/doctor.sh)"
    return 1
  fi
  for b in containerd containerd-shim-runc-v2 ctr; do
    tool_path "$b" >/dev/null 2>&1 || {
      echo "$b not in $K8S_BIN (hack/build-k8s.sh builds it)"
      return 1
    }
  done
}

# proc_exe NAME prints the executable of the recorded process, with " (deleted)" kept when
# the binary was replaced on disk (make build) after the process started.
proc_exe() {
  local pid
  pid=$(cat "$PIDS/$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && alive "$pid" || return 1
  readlink "/proc/$pid/exe" 2>/dev/null
}

# is_running NAME: the process recorded in $PIDS/NAME is alive and still the same program
# (guards against a recycled PID), even if its binary was rebuilt since.
is_running() {
  local exe
  exe=$(proc_exe "$1") || return 1
  [ "${exe% (deleted)}" = "$(cat "$PIDS/$1.exe" 2>/dev/null)" ]
}

# is_stale NAME: running, but from a binary that has been replaced on disk by a different one
# since (go build rewrites its output even when nothing changed, so compare the bytes).
is_stale() {
  local exe
  exe=$(proc_exe "$1") || return 1
  is_running "$1" && [ "$exe" != "${exe% (deleted)}" ] &&
    ! cmp -s "/proc/$(cat "$PIDS/$1")/exe" "${exe% (deleted)}"
}

# start_proc NAME CMD...: starts CMD in its own session, logging to $LOGS/NAME.log, and
# records its PID. Does nothing when NAME is already running.
start_proc() {
  local name=$1
  shift
  if is_stale "$name"; then
    log "$name's binary was rebuilt; restarting it"
    stop_proc "$name"
  fi
  if is_running "$name"; then
    log "$name already running (pid $(cat "$PIDS/$name"))"
    return 0
  fi
  mkdir -p "$PIDS" "$LOGS"
  log "starting $name"
  printf '%q ' "$@" >"$PIDS/$name.cmd"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$PIDS/$name"
  # The exe link appears once exec happened; wait for it so is_running can compare.
  local i
  for i in $(seq 50); do
    local exe
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
    if [ -n "$exe" ] && [ "$(basename "$exe")" != bash ] && [ "$(basename "$exe")" != setsid ]; then
      echo "$exe" >"$PIDS/$name.exe"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null || die "$name exited at once; last log lines:
$(tail -n 20 "$LOGS/$name.log")"
  readlink "/proc/$pid/exe" >"$PIDS/$name.exe"
}

# stop_proc NAME: SIGTERM, then SIGKILL after a grace period, the recorded process only.
stop_proc() {
  local name=$1 pid i
  if ! is_running "$name"; then
    rm -f "$PIDS/$name" "$PIDS/$name.exe" "$PIDS/$name.cmd"
    return 0
  fi
  pid=$(cat "$PIDS/$name")
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 100); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    log "$name did not stop in 10s; killing"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
  fi
  rm -f "$PIDS/$name" "$PIDS/$name.exe" "$PIDS/$name.cmd"
}

# wait_for WHAT TIMEOUT_S CMD...: retries CMD every 0.5 s until it succeeds.
wait_for() {
  local what=$1 timeout=$2 deadline
  shift 2
  deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "timed out after ${timeout}s waiting for $what"
      return 1
    fi
    sleep 0.5
  done
}

# kubectl_ runs the pinned kubectl against this cluster.
kubectl_() {
  local kubectl
  kubectl=$(tool_path kubectl) || return 1
  "$kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"
}

# prepare_bench_cluster: the common start of the benchmark scripts (replay, scale), which run
# a fresh control plane of their own: finds the Kubernetes binaries, refuses to start over a
# cluster already running in $STATE, resets its etcd, and installs an EXIT trap that stops
# the cluster (or, with KEEP_CLUSTER=yes, says how to reach and stop it).
prepare_bench_cluster() {
  K8S_BIN=$(k8s_bin_dir)
  tool_path kube-apiserver >/dev/null || die "no Kubernetes binaries in $K8S_BIN"
  export GPUSHARE_K8S_BIN=$K8S_BIN
  if is_running kube-apiserver; then
    die "a cluster already runs in $STATE; stop it first: GPUSHARE_STATE_DIR=$STATE hack/cluster-down.sh"
  fi
  rm -rf "$STATE/etcd"
  mkdir -p "$STATE" "$PIDS" "$LOGS"
  echo "$K8S_BIN" >"$STATE/k8s-bin"
  trap bench_teardown EXIT
}

bench_teardown() {
  local rc=$?
  if [ "${KEEP_CLUSTER:-no}" = yes ]; then
    log "cluster left running: export KUBECONFIG=$KUBECONFIG_FILE (stop: GPUSHARE_STATE_DIR=$STATE hack/cluster-down.sh)"
  else
    "$REPO/hack/cluster-down.sh" || log "WARNING: cluster-down failed"
  fi
  exit "$rc"
}
