#!/usr/bin/env bash
# Scale benchmark (docs/design/benchmarks.md, "Scale benchmark"): N nodes of 8 cards ×
# 16 units on a local control plane of its own, then in one run
#   a) kube-scheduler alone (gpu-mem a plain extended resource) schedules PODS pods,
#   b) kube-scheduler + the gpushare extender (filter, prioritize, bind) schedules the same set,
#      or with MODE=plugin gpushare-scheduler alone (deploy/gpushare-scheduler's configuration,
#      policy POLICY, percentageOfNodesToScore PCT), the pods naming it in schedulerName,
#   burst: BURST_PODS pods of BURST_UNITS units created at once on one node,
#   memory: PLACED pods created already bound; the extender's RSS once its cache holds them,
#           and again after an extender restart (cold LIST of everything).
#   MODE=dra: DRA-path throughput. setup also publishes one ResourceSlice per node (the DRA
#   back end's, built by pkg/dra) and the DeviceClass; each round runs
#     ref) kube-scheduler alone on the gpu-mem pods (phase a of the other modes),
#     a) kube-scheduler alone on the same pod shapes asking through ResourceClaims (one per
#        pod, created before the timing starts; its DynamicResources plugin allocates),
#     b) gpushare-scheduler on the gpu-mem pods, as MODE=plugin's phase b,
#     c) with DRA_PLUGIN=yes, gpushare-scheduler on the ResourceClaim pods;
#   claims are checked allocated, reserved for their pod, no card over its memory.
# burst and memory measure the extender in every mode; MODE=plugin and MODE=dra run only
# the scheduling phases unless PHASES asks for them.
# Prints the result table and leaves the JSON results in $OUT (load.txt: load average and
# kube-apiserver + etcd CPU per pod of each phase). Every process it starts is
# stopped by PID at the end (KEEP_CLUSTER=yes leaves the cluster running).
#
#   hack/bench/scale.sh                      # N=5000 PODS=2000
#   N=500 PODS=300 PLACED=4000 hack/bench/scale.sh
#   MODE=plugin POLICY=fgd hack/bench/scale.sh
#   MODE=dra N=500 PODS=300 ROUNDS=2 hack/bench/scale.sh
#
# Settings (environment): MODE (extender | plugin | dra: who runs phase b, see above), POLICY (binpack: the
# plugin's policy with MODE=plugin), PHASES (ab burst memory; ab with MODE=plugin and dra:
# the steps to run), N, PODS, BURST_PODS (100), BURST_UNITS (6), PLACED (40000),
# WORKERS (32 concurrent creates), EXTENDER_QPS (1000; the extender's own default of 100
# caps binds at 100/s, one write each), OUT (_output/scale-results; with MODE=plugin
# _output/scale-results-plugin, with MODE=dra _output/scale-results-dra, so every mode's
# results stay side by side), KEEP_CLUSTER (no),
# SKIP_MEMORY (no), PCT (100: percentageOfNodesToScore of both phases; 0 = adaptive),
# EXTENDER_GOMEMLIMIT (64MiB: the Go runtime's soft memory limit for the extender, as the
# Deployment sets it; empty: none), MEMORY_SETTLE (150s: memory step, idle time before RSS
# is read: the Go runtime forces a GC every 2 minutes, so this reads the steady state, not
# the garbage of the last 40,000 watch events, which no GC collects while nothing allocates),
# PROFILE (seconds; empty: none): CPU profiles of kube-scheduler in phases a and b and of the
# extender (run with --profiling) in phase b, PROFILE seconds from each phase's start, into
# $OUT/profile-{a-scheduler,b-scheduler,b-extender}.pprof (go tool pprof -top FILE); with
# MODE=plugin gpushare-scheduler's in phase b, $OUT/profile-b-plugin.pprof; with MODE=dra
# also profile-dra-scheduler.pprof (phase a) and profile-dra-plugin.pprof (phase c).
# A phase waits for its pods at most gpushare-scalebench's --timeout (20m);
# GPUSHARE_TIMEOUT=50m gives claim phases at 5000 nodes on a loaded machine more.
# DRA_PLUGIN (MODE=dra: yes adds phase c; no), ROUNDS (MODE=plugin: 5; dra: 3; extender:
# 1, the only value it takes): phases a and b alternate
# ROUNDS times on the same nodes, each round's results in $OUT/round-N, and the report judges
# the median b/a: on a shared machine one a/b pair moves by ±10 % with the host's load, and
# alternating cancels slow drifts (profiles, when asked, are taken in the first round).
# The state dir and every port are apart from the demo, e2e and replay clusters:
# GPUSHARE_STATE_DIR=_output/scale and the port block "scale" of hack/lib/ports.sh
# (apiserver 36443, etcd 36379, scheduler 36259, extender 36345, gpushare-scheduler 36269).
#
# No kwok and no kube-controller-manager: the nodes are Node objects created with a Ready
# condition and nobody heartbeats them (the node lifecycle controller would taint them
# unreachable; kube-scheduler looks only at allocatable, labels and taints). On 2 shared
# cores this leaves the CPU to what is measured.
set -o errexit -o nounset -o pipefail

# One brace group: bash parses all of it before running any, so editing this file while a
# benchmark runs cannot derail it.
{

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MODE=${MODE:-extender}
POLICY=${POLICY:-binpack}
case $MODE in
extender) default_phases="ab burst memory" default_out=$REPO/_output/scale-results default_rounds=1 ;;
plugin) default_phases="ab" default_out=$REPO/_output/scale-results-plugin default_rounds=5 ;;
dra) default_phases="ab" default_out=$REPO/_output/scale-results-dra default_rounds=3 ;;
*)
  echo "MODE=$MODE: want extender, plugin or dra" >&2
  exit 2
  ;;
esac
N=${N:-5000}
PODS=${PODS:-2000}
BURST_PODS=${BURST_PODS:-100}
BURST_UNITS=${BURST_UNITS:-6}
PLACED=${PLACED:-40000}
WORKERS=${WORKERS:-32}
EXTENDER_QPS=${EXTENDER_QPS:-1000}
OUT=${OUT:-$default_out}
# percentageOfNodesToScore of both phases: 100 hands the extender every node (the case the
# targets are set for); 0 is kube-scheduler's adaptive default (10% of 5000 nodes).
PCT=${PCT:-100}
KEEP_CLUSTER=${KEEP_CLUSTER:-no}
EXTENDER_GOMEMLIMIT=${EXTENDER_GOMEMLIMIT-64MiB}
MEMORY_SETTLE=${MEMORY_SETTLE:-150s}
SKIP_MEMORY=${SKIP_MEMORY:-no}
PROFILE=${PROFILE:-}
PHASES=${PHASES:-$default_phases}
ROUNDS=${ROUNDS:-$default_rounds}
case $ROUNDS in
'' | *[!0-9]* | 0)
  echo "ROUNDS=$ROUNDS: want a positive number" >&2
  exit 2
  ;;
esac
DRA_PLUGIN=${DRA_PLUGIN:-no}
[ "$ROUNDS" = 1 ] || [ "$MODE" != extender ] || {
  echo "ROUNDS=$ROUNDS: alternating rounds are for MODE=plugin and MODE=dra" >&2
  exit 2
}
if [ "$SKIP_MEMORY" = yes ]; then PHASES=${PHASES//memory/}; fi
want() { [[ " $PHASES " == *" $1 "* ]]; }

export GPUSHARE_STATE_DIR=${GPUSHARE_STATE_DIR:-$REPO/_output/scale}
export GPUSHARE_BIN=${GPUSHARE_BIN:-$GPUSHARE_STATE_DIR/bin}
export GPUSHARE_NODE_MODE=kwok
export GPUSHARE_KWOK_NODES=no
# The scale benchmark's port block (hack/lib/ports.sh).
export GPUSHARE_PORT_BASE=${GPUSHARE_PORT_BASE:-scale}
export GPUSHARE_PLUGIN_POLICY=$POLICY
# Read by the extender itself (its flags have GPUSHARE_<FLAG> mirrors).
export GPUSHARE_KUBE_API_QPS=$EXTENDER_QPS
export GPUSHARE_KUBE_API_BURST=$((2 * EXTENDER_QPS))

LOG_TAG=bench-scale
# shellcheck source=hack/lib/cluster.sh
source "$REPO/hack/lib/cluster.sh"
# shellcheck source=hack/lib/certs.sh
source "$REPO/hack/lib/certs.sh"
# shellcheck source=hack/lib/controlplane.sh
source "$REPO/hack/lib/controlplane.sh"

log "building extender and gpushare-scalebench into $GPUSHARE_BIN"
mkdir -p "$GPUSHARE_BIN"
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$GPUSHARE_BIN/extender" ./cmd/extender &&
  CGO_ENABLED=0 go build -trimpath -o "$GPUSHARE_BIN/gpushare-scalebench" ./internal/bench/cmd/gpushare-scalebench)
if [ "$MODE" != extender ]; then
  # A module of its own (k8s.io/kubernetes): minutes on a cold cache.
  log "building gpushare-scheduler into $GPUSHARE_BIN"
  (cd "$REPO/cmd/gpushare-scheduler" && GOWORK=off CGO_ENABLED=0 go build -trimpath -o "$GPUSHARE_BIN/gpushare-scheduler" .)
fi

# The working tree is shared and changes under a run: record what was built.
mkdir -p "$OUT"
{
  echo "built $(date -u +%FT%TZ) from HEAD $(git -C "$REPO" rev-parse --short HEAD)"
  echo "mode $MODE$([ "$MODE" != extender ] && echo " (policy $POLICY)")$([ "$MODE" = dra ] && echo " (phase c: $DRA_PLUGIN)")"
  echo "uncommitted changes in the extender's and gpushare-scheduler's packages:"
  git -C "$REPO" status --short cmd/extender cmd/gpushare-scheduler pkg/cache pkg/routes pkg/policy pkg/gpushare pkg/metrics pkg/schedulerplugin pkg/dra internal/bench
} >"$OUT/build.txt" 2>&1 || true

prepare_bench_cluster
find "$OUT" -maxdepth 1 \( -name '*.json' -o -name '*.pprof' \) -delete
rm -rf "$OUT"/round-*
mkdir -p "$OUT"
echo kwok >"$STATE/node-mode"

# start_bench_scheduler CONFIG: kube-scheduler with hack/bench/CONFIG at percentageOfNodesToScore PCT.
start_bench_scheduler() {
  start_scheduler "$REPO/hack/bench/$1" "s#^percentageOfNodesToScore: .*#percentageOfNodesToScore: $PCT#"
}

# start_bench_plugin_scheduler: gpushare-scheduler with deploy/gpushare-scheduler's
# configuration plus phase a's settings (scale-plain.yaml: client QPS 1000/2000,
# percentageOfNodesToScore PCT), so b differs from a by the plugin alone.
start_bench_plugin_scheduler() {
  [ -x "$GPUSHARE_BIN/gpushare-scheduler" ] || die "no $GPUSHARE_BIN/gpushare-scheduler"
  start_gpushare_scheduler "${PLUGIN_CONFIG:-$REPO/deploy/gpushare-scheduler/scheduler-config.yaml}" \
    '/^clientConnection:$/a\  qps: 1000\n  burst: 2000' \
    "\$a percentageOfNodesToScore: $PCT"
  local config=$STATE/gpushare-scheduler-config.yaml
  { grep -q '^  qps: 1000$' "$config" && grep -q "^percentageOfNodesToScore: $PCT\$" "$config"; } ||
    die "$config lacks the bench settings (qps 1000, percentageOfNodesToScore $PCT)"
}

sb() {
  "$GPUSHARE_BIN/gpushare-scalebench" --kubeconfig "$KUBECONFIG_FILE" --out "$OUT" --workers "$WORKERS" "$@"
}
note_load() { echo "$(date -u +%FT%TZ) $1: $(uptime)" | tee -a "$OUT/load.txt" >&2; }
: >"$OUT/load.txt"
# profile NAME URL: in the background, PROFILE seconds of CPU profile from URL (a pprof
# endpoint: kube-scheduler's takes the admin token, the extender's diagnostics listener a
# client certificate of its CA) into $OUT/profile-NAME.pprof.
profile() {
  [ -n "$PROFILE" ] || return 0
  local auth=(-k -H "Authorization: Bearer $(cat "$STATE/pki/token")")
  [[ $1 == *-extender ]] &&
    auth=(--cacert "$EXTENDER_PKI/ca.crt" --cert "$EXTENDER_PKI/client.crt" --key "$EXTENDER_PKI/client.key")
  curl -sf "${auth[@]}" -o "$OUT/profile-$1.pprof" \
    "$2/debug/pprof/profile?seconds=$PROFILE" || log "WARNING: no $1 profile" &
}
# cp_ticks: CPU time (utime + stime, in 10 ms clock ticks) of kube-apiserver and etcd so far.
cp_ticks() {
  local t=0 p
  for p in kube-apiserver etcd; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$(cat "$PIDS/$p")/stat" 2>/dev/null || echo 0)))
  done
  echo "$t"
}
# cp_note PHASE TICKS_BEFORE: the control plane's CPU per pod during PHASE, into load.txt
# (both phases pay it; the table's CPU figures are the scheduler's and the extender's).
cp_note() {
  local ms=$((($(cp_ticks) - $2) * 10 * 100 / PODS))
  echo "phase $1: kube-apiserver + etcd CPU $((ms / 100)).$(printf %02d $((ms % 100))) ms per pod" | tee -a "$OUT/load.txt" >&2
}
ext_probe() {
  echo --metrics-url "https://127.0.0.1:$EXTENDER_DIAGNOSTICS_PORT/metrics" --extender-pid "$(cat "$PIDS/extender")" \
    --extender-client-cert "$EXTENDER_PKI/client.crt" --extender-client-key "$EXTENDER_PKI/client.key" \
    --extender-ca "$EXTENDER_PKI/ca.crt"
}

ensure_credentials
start_etcd
start_apiserver
note_load "cluster up"
sb --nodes "$N" setup
if [ "$MODE" = dra ]; then sb --nodes "$N" dra-setup; fi

# phase_a ROUND [SET]: kube-scheduler alone schedules the pod set SET (plain; dra: the
# ResourceClaim pods), which is then deleted (profiled, when asked, in the first round only).
phase_a() {
  local set=${2:-plain} tag=${2:-a} cp0
  log "phase $set (round $1 of $ROUNDS): kube-scheduler alone, $PODS pods on $N nodes"
  start_bench_scheduler scale-plain.yaml
  note_load "round $1 phase $set start"
  [ "$1" -gt 1 ] || profile "$tag-scheduler" "https://127.0.0.1:$SCHEDULER_PORT"
  cp0=$(cp_ticks)
  sb --set "$set" --pods "$PODS" phase
  note_load "round $1 phase $set end"
  cp_note "$tag" "$cp0"
  stop_proc kube-scheduler
  sb --set "$set" delete
}

# phase_plugin ROUND [SET]: gpushare-scheduler schedules the pod set SET (plugin; dra-plugin:
# the ResourceClaim pods), which is then deleted.
phase_plugin() {
  local set=${2:-plugin} tag=${2:-b} cp0
  log "phase $set (round $1 of $ROUNDS): gpushare-scheduler (plugin, policy $POLICY), $PODS pods"
  start_bench_plugin_scheduler
  note_load "round $1 phase $set start"
  [ "$1" -gt 1 ] || profile "${2:-b-plugin}" "https://127.0.0.1:$PLUGIN_SCHEDULER_PORT"
  cp0=$(cp_ticks)
  sb --set "$set" --scheduler-name gpushare-scheduler --scheduler-pid-file "$PIDS/gpushare-scheduler" --pods "$PODS" phase
  note_load "round $1 phase $set end"
  cp_note "$tag" "$cp0"
  stop_proc gpushare-scheduler
  sb --set "$set" delete
}

# keep_round ROUND FILE...: the round's result files into $OUT/round-ROUND (several rounds only).
keep_round() {
  [ "$ROUNDS" -gt 1 ] || return 0
  mkdir -p "$OUT/round-$1"
  local f
  for f in "${@:2}"; do cp "$OUT/$f" "$OUT/round-$1/"; done
}

if want ab; then
  if [ "$MODE" = dra ]; then
    for round in $(seq 1 "$ROUNDS"); do
      phase_a "$round"
      phase_a "$round" dra
      phase_plugin "$round"
      files=(plain.json dra.json plugin.json)
      if [ "$DRA_PLUGIN" = yes ]; then
        phase_plugin "$round" dra-plugin
        files+=(dra-plugin.json)
      fi
      keep_round "$round" "${files[@]}"
    done
  elif [ "$MODE" = plugin ]; then
    for round in $(seq 1 "$ROUNDS"); do
      phase_a "$round"
      phase_plugin "$round"
      keep_round "$round" plain.json plugin.json
    done
  else
    phase_a 1
    log "phase b: kube-scheduler + gpushare extender, the same $PODS pods (extender GOMEMLIMIT=${EXTENDER_GOMEMLIMIT:-unset})"
    echo "extender GOMEMLIMIT=${EXTENDER_GOMEMLIMIT:-unset}" >>"$OUT/load.txt"
    GOMEMLIMIT=$EXTENDER_GOMEMLIMIT GPUSHARE_PROFILING=$([ -n "$PROFILE" ] && echo true || echo false) start_extender
    start_bench_scheduler scale-extender.yaml
    note_load "phase b start"
    profile b-scheduler "https://127.0.0.1:$SCHEDULER_PORT"
    profile b-extender "https://127.0.0.1:$EXTENDER_DIAGNOSTICS_PORT"
    cp0=$(cp_ticks)
    # shellcheck disable=SC2046
    sb --set extender --pods "$PODS" $(ext_probe) phase
    note_load "phase b end"
    cp_note b "$cp0"
    sb --set extender delete
  fi
fi

if want burst; then
  if ! is_running extender; then GOMEMLIMIT=$EXTENDER_GOMEMLIMIT start_extender; fi
  if ! is_running kube-scheduler; then start_bench_scheduler scale-extender.yaml; fi
  log "burst: $BURST_PODS pods of $BURST_UNITS units at once on one node"
  note_load "burst start"
  # shellcheck disable=SC2046
  sb --burst-pods "$BURST_PODS" --burst-units "$BURST_UNITS" $(ext_probe) burst
  sb --set burst delete
fi
stop_proc kube-scheduler

if want memory; then
  if ! is_running extender; then GOMEMLIMIT=$EXTENDER_GOMEMLIMIT start_extender; fi
  log "memory: $PLACED placed pods on $N nodes (extender GOMEMLIMIT=${EXTENDER_GOMEMLIMIT:-unset}, RSS read after $MEMORY_SETTLE idle)"
  note_load "memory start"
  # shellcheck disable=SC2046
  sb --nodes "$N" --placed "$PLACED" --settle "$MEMORY_SETTLE" $(ext_probe) memory
  log "memory: extender restart with the placed pods already there"
  stop_proc extender
  GOMEMLIMIT=$EXTENDER_GOMEMLIMIT start_extender
  sleep "$MEMORY_SETTLE"
  # shellcheck disable=SC2046
  sb --nodes "$N" --placed "$PLACED" $(ext_probe) footprint
  note_load "memory end"
fi

sb report --plugin-policy "$POLICY"
log "results in $OUT (report.md, *.json, load.txt)"
exit
}
