# The real node of the local cluster: containerd + kubelet (+ share-plugin), and its clean-up.
# Sourced after hack/lib/cluster.sh. Facts behind the settings: docs/local-cluster.md.
# shellcheck shell=bash

# install_packages installs, from Debian, what the cluster needs and the machine lacks
# (hack/lib/prereqs.sh): curl and openssl always; runc, the CNI plugins and iproute2 for the
# real node (unless GPUSHARE_NODE_MODE=kwok). containerd itself is built from Go modules
# (hack/build-k8s.sh). Only as root on an apt system; GPUSHARE_NO_APT=1 turns it off.
install_packages() {
  if [ "$NODE_MODE" = kwok ]; then
    install_missing build
  else
    install_missing build node
  fi
}

# claim_real_node takes the machine-wide real-node lock for $STATE, or fails naming the
# state dir that holds it.
claim_real_node() {
  local owner
  owner=$(cat "$REAL_NODE_LOCK" 2>/dev/null || true)
  if [ -n "$owner" ] && [ "$owner" != "$STATE" ]; then
    if [ -d "$owner/pids" ] && ls "$owner"/pids/kubelet "$owner"/pids/containerd >/dev/null 2>&1; then
      die "the real node is held by the cluster in $owner; stop it first:
  GPUSHARE_STATE_DIR=$owner $REPO/hack/cluster-down.sh"
    fi
    log "taking over a stale real-node lock from $owner"
  fi
  if [ -e "$KUBELET_DIR" ] && [ ! -f "$OWNER_MARK" ] && [ -n "$(ls -A "$KUBELET_DIR" 2>/dev/null)" ]; then
    die "$KUBELET_DIR exists and was not made by this project (another kubelet on this machine?); refusing to touch it"
  fi
  if ! is_running kubelet && curl -ksf -o /dev/null "https://127.0.0.1:10250/healthz" 2>/dev/null; then
    die "something else serves the kubelet port 10250"
  fi
  echo "$STATE" >"$REAL_NODE_LOCK"
  mkdir -p "$KUBELET_DIR"
  echo "$STATE" >"$OWNER_MARK"
}

# write_containerd_config writes the node's containerd 2.x configuration (version 3) and
# its CNI network. CDI specs are read from $CDI_DIR only, where share-plugin writes the
# simulated cards' spec, so the machine's /etc/cdi and /var/run/cdi play no part.
write_containerd_config() {
  mkdir -p "$CONTAINERD_DIR" "$STATE/cni/net.d" "$CDI_DIR"
  cat >"$CONTAINERD_DIR/config.toml" <<EOF
version = 3
root = "$CONTAINERD_DIR/root"
state = "$CONTAINERD_DIR/state"

[grpc]
  address = "$CONTAINERD_SOCK"

[ttrpc]
  address = "$CONTAINERD_DIR/containerd.sock.ttrpc"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "$IMAGE_PAUSE"

[plugins."io.containerd.cri.v1.runtime"]
  # root here lacks CAP_SYS_RESOURCE: without this every sandbox fails to start.
  restrict_oom_score_adj = true
  enable_cdi = true
  cdi_spec_dirs = ["$CDI_DIR"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$STATE/cni/net.d"
EOF
  cat >"$STATE/cni/net.d/10-$CNI_NETWORK.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$CNI_SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
}

write_kubelet_config() {
  mkdir -p "$STATE/kubelet/pki"
  cat >"$STATE/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
nodeStatusUpdateFrequency: 4s
# No registry is reachable: never garbage-collect the locally imported images.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
EOF
}

# ctr_ runs the ctr built with the node's containerd (hack/build-k8s.sh) against it.
ctr_() {
  local ctr
  ctr=$(tool_path ctr) || return 1
  # containerd 2.2 warns on every call that cgroup v1 is deprecated; this machine has no
  # choice, so keep the warning out of the logs. ctr's exit status is kept (pipefail).
  { "$ctr" -n k8s.io -a "$CONTAINERD_SOCK" "$@" 2>&1 1>&3 3>&- | sed '/support for cgroup v1 is deprecated/d' >&2; } 3>&1
}

# import_images imports the tarballs built by hack/build-images.sh into containerd.
import_images() {
  local t
  for t in "$IMAGES_DIR"/gpuenv.tar "$IMAGES_DIR"/pause.tar; do
    [ -f "$t" ] || die "$t missing: run hack/build-images.sh"
    ctr_ images import "$t" >/dev/null
  done
  # The CRI plugin looks images up by name; make sure both tags are there.
  local have
  have=$(ctr_ images ls -q)
  for t in "$IMAGE_GPUENV" "$IMAGE_PAUSE"; do
    grep -qx "$t" <<<"$have" || die "$t not in containerd after import"
  done
}

start_containerd() {
  write_containerd_config
  is_running containerd || touch "$CONTAINERD_DIR/started"
  # containerd finds its runc shim on PATH: the one built beside it.
  local containerd shim
  containerd=$(tool_path containerd) || die "no containerd built"
  shim=$(tool_path containerd-shim-runc-v2) || die "no containerd-shim-runc-v2 built"
  (PATH="$(dirname "$shim"):$PATH" start_proc containerd "$containerd" --config "$CONTAINERD_DIR/config.toml")
  wait_for "containerd socket" 30 ctr_ version
  import_images
}

start_kubelet() {
  write_kubelet_config
  mkdir -p "$KUBELET_DIR"
  start_proc kubelet "$(tool_path kubelet)" \
    --config "$STATE/kubelet/config.yaml" \
    --kubeconfig "$KUBECONFIG_FILE" \
    --cert-dir "$STATE/kubelet/pki" \
    --root-dir "$KUBELET_DIR" \
    --hostname-override "$(node_name)" \
    --node-labels "cgpu=true,$REAL_NODE_LABEL=true" \
    --v=2
  wait_for "node $(node_name) Ready" 90 node_ready "$(node_name)"
}

node_ready() {
  [ "$(kubectl_ get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

node_gpu_mem() {
  kubectl_ get node "$1" -o 'jsonpath={.status.allocatable.aliyun\.com/gpu-mem}' 2>/dev/null
}

# start_gpu_source makes the real node advertise its simulated card through the back end
# $BACKEND names: share-plugin as a device plugin (aliyun.com/gpu-mem) or as a kubelet DRA
# plugin (the node's ResourceSlice, on a node labelled gpushare.io/backend=dra, with
# deploy/dra's DeviceClass). When share-plugin already runs the other back end it is
# restarted, but only once no pod on the node holds memory through the old one: a back end
# never takes over cards the other granted, and a DRA claim is unprepared only by the DRA
# plugin. Without a built share-plugin (until it exists) a node-status patch stands in with
# the same numbers (one T4: 14 GiB).
start_gpu_source() {
  local node running
  node=$(node_name)
  if [ ! -x "$GPUSHARE_BIN/share-plugin" ]; then
    log "WARNING: $GPUSHARE_BIN/share-plugin not built; patching node $node status with gpu-mem 14 / gpu-count 1 instead"
    kubectl_ patch node "$node" --subresource=status --type=merge -p \
      '{"status":{"capacity":{"aliyun.com/gpu-mem":"14","aliyun.com/gpu-count":"1"},"allocatable":{"aliyun.com/gpu-mem":"14","aliyun.com/gpu-count":"1"}}}' >/dev/null
    return 0
  fi
  running=$(cat "$STATE/backend" 2>/dev/null || echo device-plugin)
  if is_running share-plugin && [ "$running" != "$BACKEND" ]; then
    local holders
    holders=$(pods_using_backend "$node" "$running" | tr '\n' ' ')
    [ -z "$holders" ] || die "share-plugin serves node $node with the $running back end and these pods hold memory through it: ${holders% }
  delete them first (make demo deletes its own notebooks), then start the $BACKEND back end again"
    log "share-plugin back end $running -> $BACKEND"
    stop_proc share-plugin
  fi
  if [ "$BACKEND" = dra ]; then
    kubectl_ apply -f "$REPO/deploy/dra/deviceclass.yaml" >/dev/null
    kubectl_ label node "$node" --overwrite "$BACKEND_LABEL=dra" >/dev/null
  else
    kubectl_ label node "$node" "$BACKEND_LABEL-" >/dev/null 2>&1 || true
    kubectl_ delete resourceslices --field-selector "spec.nodeName=$node,spec.driver=$DRA_DRIVER" \
      --ignore-not-found >/dev/null 2>&1 || true
  fi
  echo "$BACKEND" >"$STATE/backend"
  write_runtime_config
  # GPUSHARE_BACKEND and GPUSHARE_NVIDIA_RUNTIME_CONFIG are read by share-plugin from its
  # environment (a test may point the latter elsewhere).
  GPUSHARE_BACKEND=$BACKEND GPUSHARE_NVIDIA_RUNTIME_CONFIG=${GPUSHARE_NVIDIA_RUNTIME_CONFIG:-$RUNTIME_CONFIG} \
    start_proc share-plugin "$GPUSHARE_BIN/share-plugin" \
    --kubeconfig "$KUBECONFIG_FILE" \
    --node-name "$node" \
    --simulate "$SIMULATE" \
    --device-list-strategy "$DEVICE_LIST_STRATEGY" \
    --cdi-spec-dir "$CDI_DIR" \
    --limit-hook-path "$GPUSHARE_BIN/gpushare-limit-hook" \
    --limit-hook-failure-dir "$STATE/limit-hook-failures" \
    --simulate-processes-file "$STATE/gpu-processes.yaml" \
    --device-plugin-dir "$KUBELET_DIR/device-plugins" \
    --pod-resources-socket "$KUBELET_DIR/pod-resources/kubelet.sock" \
    --metrics-address "127.0.0.1:$SHARE_PLUGIN_METRICS_PORT"
  if [ "$BACKEND" = dra ]; then
    wait_for "node $node's ResourceSlice (share-plugin --backend=dra)" 60 node_has_slice "$node" ||
      die "share-plugin --backend=dra published no ResourceSlice for node $node; see $LOGS/share-plugin.log"
    return 0
  fi
  wait_for "node $node to advertise aliyun.com/gpu-mem (share-plugin)" 60 node_has_gpu_mem "$node" ||
    die "share-plugin did not make node $node advertise aliyun.com/gpu-mem; see $LOGS/share-plugin.log"
}

# write_runtime_config writes the NVIDIA container runtime configuration share-plugin reads
# for its preflight (--nvidia-runtime-config). The local node runs runc without the NVIDIA
# runtime, so no container's own NVIDIA_VISIBLE_DEVICES reaches a card: the file says so
# with the runtime's own key, and the node's limit and mps modes can hold.
write_runtime_config() {
  mkdir -p "${RUNTIME_CONFIG%/*}"
  cat >"$RUNTIME_CONFIG" <<'EOF'
# Written by hack/lib/realnode.sh: the local node's containerd runs runc without the NVIDIA
# container runtime, which is what this key makes the NVIDIA runtime do.
accept-nvidia-visible-devices-envvar-when-unprivileged = false
EOF
}

# pods_using_backend NODE BACKEND prints namespace/name of each pod on NODE, not finished,
# that holds memory through BACKEND: a ResourceClaim (dra) or aliyun.com/gpu-mem
# (device-plugin).
pods_using_backend() {
  local jp
  if [ "$2" = dra ]; then
    jp='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.resourceClaims[*].name}{"\n"}{end}'
  else
    jp='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.spec.containers[*].resources.limits.aliyun\.com/gpu-mem}{.spec.initContainers[*].resources.limits.aliyun\.com/gpu-mem}{"\n"}{end}'
  fi
  kubectl_ get pods --all-namespaces -o "jsonpath=$jp" \
    --field-selector "spec.nodeName=$1,status.phase!=Succeeded,status.phase!=Failed" | awk 'NF > 1 {print $1}'
}

node_has_gpu_mem() { [ -n "$(node_gpu_mem "$1")" ] && [ "$(node_gpu_mem "$1")" != 0 ]; }

node_has_slice() {
  [ -n "$(kubectl_ get resourceslices --field-selector "spec.nodeName=$1,spec.driver=$DRA_DRIVER" -o name 2>/dev/null)" ]
}

# drain_real_node deletes every pod bound to the real node and waits until kubelet has torn
# their sandboxes down through CRI (network namespaces, CNI addresses, cgroups).
drain_real_node() {
  is_running kubelet && is_running kube-apiserver || return 0
  local node
  node=$(node_name)
  kubectl_ delete pods --all-namespaces --field-selector "spec.nodeName=$node" \
    --grace-period=1 --wait=false >/dev/null 2>&1 || true
  wait_for "kubelet to stop the pods of $node" 60 no_sandboxes || true
}

# Stopped containers stay until kubelet's garbage collection, but their tasks end at once.
no_sandboxes() { [ -z "$(ctr_ tasks ls -q 2>/dev/null)" ]; }

# cleanup_runtime removes what containerd and kubelet leave behind when they were not drained:
# tasks, containers, shims, mounts, the bridge, host-local addresses and kubepods cgroups.
cleanup_runtime() {
  local id pid m
  if is_running containerd; then
    for id in $(ctr_ tasks ls -q 2>/dev/null); do
      ctr_ tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    sleep 0.5
    for id in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$id" >/dev/null 2>&1 || true; done
    for id in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$id" >/dev/null 2>&1 || true; done
  fi
  stop_proc containerd
  # Shims outlive containerd; ours carry our socket in their command line.
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" 2>/dev/null || true); do
    log "killing leftover shim $pid"
    kill -KILL "$pid" 2>/dev/null || true
  done
  # Mounts under the kubelet dir (kubelet also bind-mounts the dir onto itself) and
  # containerd's root/state, deepest first.
  awk -v k="$KUBELET_DIR" -v b="$CONTAINERD_DIR/" \
    '$2 == k || index($2, k "/") == 1 || index($2, b) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  # Network namespaces CRI made for our sandboxes, when kubelet could not remove them.
  if [ -f "$STATE/containerd/started" ]; then
    find /var/run/netns -maxdepth 1 -name 'cni-*' -newer "$STATE/containerd/started" 2>/dev/null |
      while read -r m; do
        umount -l "$m" 2>/dev/null || true
        rm -f "$m"
      done
  fi
  if ip link show "$CNI_BRIDGE" >/dev/null 2>&1; then
    ip link delete "$CNI_BRIDGE" 2>/dev/null || log "could not delete bridge $CNI_BRIDGE"
  fi
  rm -rf "/var/lib/cni/networks/$CNI_NETWORK"
  for m in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$m" ] || continue
    find "$m" -depth -type d -exec rmdir {} \; 2>/dev/null || log "some cgroups under $m are still busy"
  done
}

# release_real_node frees the kubelet dir and the lock, when this state dir holds them.
release_real_node() {
  [ "$(cat "$REAL_NODE_LOCK" 2>/dev/null)" = "$STATE" ] || return 0
  if [ -f "$OWNER_MARK" ]; then
    rm -rf "$KUBELET_DIR" || log "WARNING: could not remove $KUBELET_DIR"
  fi
  rm -rf "$CONTAINERD_DIR/root" "$CONTAINERD_DIR/state" || log "WARNING: could not remove containerd's root/state"
  rm -f "$REAL_NODE_LOCK"
}
