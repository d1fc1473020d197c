#!/usr/bin/env bash
# Replays one openb trace through the real scheduler and prints the summary line:
# builds the extender and gpushare-replay, starts a kwok-only cluster of its own (state dir
# and ports apart from the demo cluster), runs the replay, tears the cluster down.
#
#   hack/bench/replay.sh                             # default trace, binpack, seed 42
#   TRACE=gpushare40 POLICY=fgd SEED=43 hack/bench/replay.sh
#   LIMIT=500 hack/bench/replay.sh                   # first 500 pods only
#   MODE=plugin POLICY=fgd hack/bench/replay.sh      # through gpushare-scheduler
#   MODE=dra hack/bench/replay.sh                    # kube-scheduler's DRA path alone
#
# Settings (environment):
#   MODE     extender (default): kube-scheduler + the extender place the pods (replay-config.yaml);
#            plugin: gpushare-scheduler alone (replay-plugin-config.yaml, the GPUShare plugin
#            with POLICY), every pod naming it in schedulerName; results in
#            _output/replay/$TRACE/$POLICY-plugin/seed$SEED, beside the extender's, and
#            recorded with mode cluster-plugin[-toN]
#            dra: the cards through DRA (gpushare-replay --dra: a ResourceSlice per node,
#            a ResourceClaim per GPU pod) and kube-scheduler with its default plugins alone
#            (replay-dra-config.yaml), no extender, no policy (POLICY is ignored); results
#            in _output/replay/$TRACE/kube-scheduler-dra/seed$SEED, policy kube-scheduler,
#            mode cluster-dra[-toN]
#            dra-plugin: the cards through DRA as with dra, placed by gpushare-scheduler
#            (replay-plugin-config.yaml, GPUShare with POLICY scoring the DRA pods); results
#            in _output/replay/$TRACE/$POLICY-dra-plugin/seed$SEED, mode cluster-dra-plugin[-toN]
#   TRACE    pod list name: openb_pod_list_$TRACE.csv (default: default)
#   POLICY   placement policy (default: binpack)      SEED  shuffle seed (default: 42)
#   TUNE     workload tuning ratio (default: 1.3)     UNIT  milli | gib (default: milli)
#   LIMIT    replay only the first N pods (default: 0 = all)
#   STOP_AT  end the workload once the submitted GPU request reaches this % of capacity
#            (default: 0 = the whole tuned workload; 100 gives unallocated@100% in about
#            half the time, since past 100 % most pods fail and failures are the slow part)
#   OUT      result folder (default: _output/replay/$TRACE/$POLICY/seed$SEED)
#   TRACES_DIR  folder of the openb CSVs: cluster-trace-gpu-v2023 of Alibaba's clusterdata
#            repository, https://github.com/alibaba/clusterdata (default: ../shared/traces/openb
#            next to the repository)
#   REPLAY_KCM  yes: also run kube-controller-manager (default: no; see below)
#   REPLAY_ALL_PODS yes (default): drop managedResources from the scheduler config so
#                CPU-only pods go through the extender too and its prioritize ranks them,
#                as the simulator's score plugin does (fgd keeps them off the CPU GPU pods
#                need; the other policies score them 0, i.e. a random feasible node).
#                no: kube-scheduler, with no score plugin for them, takes the first
#                feasible node (first fit in node order). MODE=extender only.
#   CHURN    yes: replay under churn instead (gpushare-replay churn --kubeconfig): each pod
#            created at its trace arrival and deleted its run time after it was bound, times
#            compressed as make bench-churn's (docs/design/benchmarks-replay.md); MODE
#            extender or plugin; results (churn.json, churn-series.csv) in
#            _output/replay-churn-cluster/$TRACE/<scheduler>/seed$SEED; DRAIN (default 2m):
#            how long it goes on after the last arrival. STOP_AT does not apply.
#   KEEP_CLUSTER yes: leave the cluster running (stop it with the same environment and
#                hack/cluster-down.sh, GPUSHARE_STATE_DIR=_output/replay-cluster)
#
# It reuses hack/lib (start_proc, credentials, etcd, apiserver, extender, scheduler) and differs from
# hack/cluster-up.sh in three ways, each for throughput on 2 cores with 1213 nodes:
# - kube-scheduler runs with hack/bench/replay-config.yaml (extender decides, all
#   nodes scored, high QPS);
# - kwok gets only the node-initialize stage: pods stay Pending-but-bound (no status writes
#   per pod) and nodes have no lease heartbeats (--node-lease-duration-seconds 0);
# - no kube-controller-manager by default: without heartbeats its node lifecycle controller
#   would taint every node unreachable after 40 s, and the replay needs nothing else from
#   it (gpushare-replay creates its namespace's default service account itself).
set -o errexit -o nounset -o pipefail

# One brace group: bash parses all of it before running any, so editing this file while a
# replay runs cannot derail it.
{

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MODE=${MODE:-extender}
TRACE=${TRACE:-default}
POLICY=${POLICY:-binpack}
# No policy places the pods of MODE=dra: the results name what does.
[ "$MODE" = dra ] && POLICY=kube-scheduler
SEED=${SEED:-42}
TUNE=${TUNE:-1.3}
UNIT=${UNIT:-milli}
LIMIT=${LIMIT:-0}
STOP_AT=${STOP_AT:-0}
case $MODE in
extender) policy_dir=$POLICY ;;
plugin) policy_dir=$POLICY-plugin ;;
dra) policy_dir=$POLICY-dra ;;
dra-plugin) policy_dir=$POLICY-dra-plugin ;;
*)
  echo "MODE=$MODE: want extender, plugin, dra or dra-plugin" >&2
  exit 2
  ;;
esac
CHURN=${CHURN:-no}
if [ "$CHURN" = yes ]; then
  case $MODE in extender | plugin) ;; *)
    echo "CHURN=yes: MODE extender or plugin" >&2
    exit 2
    ;;
  esac
  OUT=${OUT:-$REPO/_output/replay-churn-cluster/$TRACE/$policy_dir/seed$SEED}
fi
OUT=${OUT:-$REPO/_output/replay/$TRACE/$policy_dir/seed$SEED}
TRACES_DIR=${TRACES_DIR:-$(cd "$REPO/.." && pwd)/shared/traces/openb}
REPLAY_KCM=${REPLAY_KCM:-no}
REPLAY_ALL_PODS=${REPLAY_ALL_PODS:-yes}
KEEP_CLUSTER=${KEEP_CLUSTER:-no}

# A cluster of its own, beside a possibly running demo cluster, and binaries of its own:
# hack/lib's is_running compares /proc/PID/exe with the recorded path, so a rebuild of the
# shared bin/ while the replay runs would make cluster-down.sh miss the extender.
export GPUSHARE_STATE_DIR=${GPUSHARE_STATE_DIR:-$REPO/_output/replay-cluster}
export GPUSHARE_BIN=${GPUSHARE_REPLAY_BIN:-$REPO/_output/replay-bin}
export GPUSHARE_NODE_MODE=kwok
export GPUSHARE_KWOK_NODES=no
export GPUSHARE_EXTENDER_POLICY=$POLICY
# The replay's port block (hack/lib/ports.sh), apart from the demo's and the e2e suite's.
export GPUSHARE_PORT_BASE=${GPUSHARE_PORT_BASE:-replay}
export GPUSHARE_PLUGIN_POLICY=$POLICY

LOG_TAG=replay
# shellcheck source=hack/lib/cluster.sh
source "$REPO/hack/lib/cluster.sh"
# shellcheck source=hack/lib/certs.sh
source "$REPO/hack/lib/certs.sh"
# shellcheck source=hack/lib/controlplane.sh
source "$REPO/hack/lib/controlplane.sh"

NODES_CSV=$TRACES_DIR/openb_node_list_gpu_node.csv
PODS_CSV=$TRACES_DIR/openb_pod_list_$TRACE.csv
[ -f "$NODES_CSV" ] || die "no node list $NODES_CSV: set TRACES_DIR to the openb CSVs of cluster-trace-gpu-v2023 (https://github.com/alibaba/clusterdata)"
[ -f "$PODS_CSV" ] || die "no pod list $PODS_CSV; traces: $(find "$TRACES_DIR" -maxdepth 1 -name 'openb_pod_list_*.csv' -printf '%f\n' | sed 's/openb_pod_list_//; s/\.csv//' | sort | tr '\n' ' ')"

log "building extender and gpushare-replay"
mkdir -p "$GPUSHARE_BIN"
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$GPUSHARE_BIN/extender" ./cmd/extender &&
  CGO_ENABLED=0 go build -trimpath -o "$GPUSHARE_BIN/gpushare-replay" ./internal/bench/cmd/gpushare-replay)
if [ "$MODE" = plugin ] || [ "$MODE" = dra-plugin ]; then
  # A module of its own (k8s.io/kubernetes): minutes on a cold cache.
  log "building gpushare-scheduler"
  (cd "$REPO/cmd/gpushare-scheduler" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$GPUSHARE_BIN/gpushare-scheduler" .)
fi

prepare_bench_cluster
echo kwok >"$STATE/node-mode"

# start_replay_kwok: kwok with the node-initialize stage only, and node leases only when
# kube-controller-manager runs (its node lifecycle controller needs heartbeats).
start_replay_kwok() {
  local lease=0
  if [ "$REPLAY_KCM" = yes ]; then lease=40; fi
  local stages
  stages=$(tool_path kwok-stages.yaml) || die "no kwok-stages.yaml"
  awk '/^---/ { exit } { print }' "$stages" >"$STATE/kwok-replay-stages.yaml"
  grep -q 'name: node-initialize' "$STATE/kwok-replay-stages.yaml" ||
    die "$stages does not start with the node-initialize stage"
  start_proc kwok "$(tool_path kwok)" \
    --kubeconfig "$KUBECONFIG_FILE" \
    --config "$STATE/kwok-replay-stages.yaml" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-lease-duration-seconds "$lease" \
    --server-address "127.0.0.1:$KWOK_PORT"
}

# The replay configuration; with REPLAY_ALL_PODS=yes without managedResources (the
# extender entry's last field: cut it and its list).
REPLAY_CONFIG=$REPO/hack/bench/replay-config.yaml
REPLAY_CONFIG_EDITS=()
if [ "$REPLAY_ALL_PODS" = yes ]; then
  # shellcheck disable=SC2016 # a sed expression: $ is the last line
  REPLAY_CONFIG_EDITS=('/^  managedResources:/,$d')
  if sed "${REPLAY_CONFIG_EDITS[0]}" "$REPLAY_CONFIG" | grep -v '^[[:space:]]*#' | grep -q 'ignoredByScheduler\|managedResources'; then
    die "could not drop managedResources from $REPLAY_CONFIG"
  fi
fi

main() {
  ensure_credentials
  start_etcd
  start_apiserver
  if [ "$REPLAY_KCM" = yes ]; then start_controller_manager; fi
  # The mode's gpushare-replay flags: the pods handed to gpushare-scheduler (no extender to
  # scrape), or the extender's /metrics for its verb latencies.
  local flags
  if [ "$MODE" = plugin ] || [ "$MODE" = dra-plugin ]; then
    # gpushare-scheduler alone: every replay pod names it, so kube-scheduler has nothing to do.
    [ -x "$GPUSHARE_BIN/gpushare-scheduler" ] || die "no $GPUSHARE_BIN/gpushare-scheduler"
    start_replay_kwok
    start_gpushare_scheduler "$REPO/hack/bench/replay-plugin-config.yaml"
    log "cluster up; replaying $PODS_CSV through gpushare-scheduler (policy $POLICY, seed $SEED, tune $TUNE, $MODE) into $OUT"
    flags=(--scheduler-name gpushare-scheduler --mode-suffix "$MODE" --metrics-url "")
    [ "$MODE" = dra-plugin ] && flags+=(--dra)
  elif [ "$MODE" = dra ]; then
    # kube-scheduler alone, its default plugins; the harness publishes the slices and claims.
    start_replay_kwok
    start_scheduler "$REPO/hack/bench/replay-dra-config.yaml"
    log "cluster up; replaying $PODS_CSV through kube-scheduler's DRA path alone (seed $SEED, tune $TUNE) into $OUT"
    flags=(--dra --mode-suffix dra --metrics-url "")
  else
    # Without managedResources the scheduler hands CPU-only pods to the extender's bind too.
    GPUSHARE_BIND_NON_GPU_PODS=$([ "$REPLAY_ALL_PODS" = yes ] && echo true || echo false) start_extender
    start_replay_kwok
    start_scheduler "$REPLAY_CONFIG" "${REPLAY_CONFIG_EDITS[@]}"
    log "cluster up; replaying $PODS_CSV (policy $POLICY, seed $SEED, tune $TUNE, all pods to the extender: $REPLAY_ALL_PODS) into $OUT"
    flags=(--mode-suffix "$([ "$REPLAY_ALL_PODS" = yes ] && echo allpods)"
      --metrics-url "https://127.0.0.1:$EXTENDER_DIAGNOSTICS_PORT/metrics"
      --extender-client-cert "$EXTENDER_PKI/client.crt"
      --extender-client-key "$EXTENDER_PKI/client.key"
      --extender-ca "$EXTENDER_PKI/ca.crt")
  fi

  mkdir -p "$OUT"
  # What both replays read: the cluster, the trace and how it is sampled.
  local trace=(--kubeconfig "$KUBECONFIG_FILE" --nodes "$NODES_CSV" --pods "$PODS_CSV"
    --seed "$SEED" --tune "$TUNE" --unit "$UNIT" --limit "$LIMIT" --out "$OUT")
  if [ "$CHURN" = yes ]; then
    local churn=(--label "$policy_dir-cluster" --drain "${DRAIN:-2m}")
    [ "$MODE" = plugin ] && churn+=(--scheduler-name gpushare-scheduler)
    # The multigpu traces carry no times: they take the default trace's, as make bench-churn.
    case $TRACE in multigpu*) churn+=(--times "$TRACES_DIR/openb_pod_list_default.csv") ;; esac
    "$GPUSHARE_BIN/gpushare-replay" churn "${trace[@]}" --policy "$POLICY" "${churn[@]}" | tee "$OUT/summary.txt"
    return
  fi
  "$GPUSHARE_BIN/gpushare-replay" "${trace[@]}" --stop-at "$STOP_AT" --policy-label "$POLICY" "${flags[@]}" | tee "$OUT/summary.txt"
}

main "$@"
exit
}
