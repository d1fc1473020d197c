#!/usr/bin/env bash
# Replays openb trace families offline under churn (gpushare-replay churn): pods arrive at
# their creation_time and leave after their run time, pods that do not fit wait in a FIFO
# queue. One cell per family × scheduler; then the table (churn.md) and, for CHART_TRACE,
# the chart of allocated GPU over time (churn-<trace>.svg).
#
#   hack/bench/churn.sh                          # 13 families × 4 schedulers, seed 42
#   FAMILIES=default SCHEDULERS=fgd hack/bench/churn.sh
#
# Settings (environment):
#   FAMILIES    trace families (default: the 13 of docs/design/benchmarks-replay.md); the
#               multigpu traces have no times: they take openb_pod_list_default.csv's by pod name
#   SCHEDULERS  any of fgd, binpack (device-plugin path, as the extender places), kube-scheduler-dra
#               (kube-scheduler's DRA allocator alone), fgd-dra (DRA with the GPUShare plugin
#               scoring with fgd); default: all four
#   SEED        (default 42); TUNE (default 1.3); ARRIVAL_FACTOR, DURATION_FACTOR (default:
#               gpushare-replay's, 3000 and 0.1)
#   CELL_TIMEOUT  seconds a cell may run (default 600)
#   ROOT        result root (default: _output/replay-churn); a cell goes to
#               $ROOT/$FAMILY/$SCHEDULER/seed$SEED and is skipped when its churn.json exists
#   TRACES_DIR  the openb CSVs (default: ../shared/traces/openb)
#   CHART_TRACE the family charted (default: default)
set -o errexit -o nounset -o pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FAMILIES=${FAMILIES:-cpu050 cpu100 cpu200 default gpushare40 gpushare60 gpushare80 gpuspec10 gpuspec20 gpuspec25 multigpu20 multigpu30 multigpu40}
SCHEDULERS=${SCHEDULERS:-binpack fgd kube-scheduler-dra fgd-dra}
SEED=${SEED:-42}
ROOT=${ROOT:-$REPO/_output/replay-churn}
TRACES_DIR=${TRACES_DIR:-$(cd "$REPO/.." && pwd)/shared/traces/openb}
CHART_TRACE=${CHART_TRACE:-default}
bin=$REPO/_output/replay-bin-offline/gpushare-replay
mkdir -p "$(dirname "$bin")" "$ROOT"
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$bin" ./internal/bench/cmd/gpushare-replay)

factors=()
[ -n "${ARRIVAL_FACTOR:-}" ] && factors+=(--arrival-factor "$ARRIVAL_FACTOR")
[ -n "${DURATION_FACTOR:-}" ] && factors+=(--duration-factor "$DURATION_FACTOR")
failed=0
# Scheduler-major: the fast schedulers cover every family before fgd-dra's slower cells
# (DRA + GPUShare scores every candidate node's allocation with fgd: about a minute a cell).
for sched in $SCHEDULERS; do
  case $sched in
  kube-scheduler-dra) how=(--offline-dra alone) ;;
  *-dra) how=(--offline-dra gpushare --policy "${sched%-dra}") ;;
  *) how=(--policy "$sched") ;;
  esac
  for family in $FAMILIES; do
    times=()
    case $family in multigpu*) times=(--times "$TRACES_DIR/openb_pod_list_default.csv") ;; esac
    out=$ROOT/$family/$sched/seed$SEED
    if [ -f "$out/churn.json" ]; then
      echo "[churn] $family $sched: done before, skipped"
      continue
    fi
    echo "[churn] $(date -u +%H:%M:%S) $family $sched"
    if ! timeout "${CELL_TIMEOUT:-600}" "$bin" churn "${how[@]}" "${times[@]}" "${factors[@]}" \
      --label "$sched" --seed "$SEED" --tune "${TUNE:-1.3}" \
      --nodes "$TRACES_DIR/openb_node_list_gpu_node.csv" \
      --pods "$TRACES_DIR/openb_pod_list_$family.csv" --out "$out"; then
      echo "[churn] $family $sched FAILED"
      rm -f "$out/churn.json"
      failed=$((failed + 1))
    fi
  done
done
"$bin" churn-report --trace "$CHART_TRACE" --chart "$ROOT/churn-$CHART_TRACE.svg" "$ROOT" | tee "$ROOT/churn.md"
[ "$failed" = 0 ] || { echo "[churn] $failed cells failed"; exit 1; }
