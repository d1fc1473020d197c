#!/usr/bin/env bash
# Runs hack/bench/replay.sh over policies × traces × seeds (the docs/design/benchmarks-replay.md table), one
# replay after another, then writes the markdown table and the chart of the results.
# A cell whose summary.json exists is skipped, so an interrupted matrix resumes.
#
#   hack/bench/replay-matrix.sh                        # 4 policies × 4 traces × seeds 42 43 44
#   POLICIES="fgd" SEEDS="42 43 44 45 46" hack/bench/replay-matrix.sh
#   OFFLINE=yes POLICIES=fgd TRACES=families SEEDS=42-51 hack/bench/replay-matrix.sh
#                                                      # make bench-families: the 13 published
#                                                      # families, families-fgd.md and .svg
#
#   MODE=plugin hack/bench/replay-matrix.sh            # the same cells through gpushare-scheduler
#
# Settings (environment):
#   MODE      extender (default) or plugin (hack/bench/replay.sh): a plugin cell goes to
#             $ROOT/$TRACE/$POLICY-plugin/seed$SEED, beside the extender's, so one ROOT holds
#             both; table.md has a table per mode and the charts a line per policy and mode
#   POLICIES  (default: binpack spread bestfit fgd)
#   TRACES    (default: default gpushare40 gpuspec10 multigpu20; families: the 13 with FGD's
#             published figures); each policy's family table goes to $ROOT/families-$POLICY.md
#             with a bar chart families-$POLICY.svg
#   SEEDS     (default: 42 43 44; 42-51: the FGD paper's ten)
#   STOP_AT   passed to hack/bench/replay.sh (default: 100: the table's figure is unallocated %
#             at 100 % arrival, which later pods cannot change)
#   ROOT      result root (default: _output/replay-matrix); a run goes to
#             $ROOT/$TRACE/$POLICY/seed$SEED; table.md and chart-$TRACE.svg to $ROOT
#   RUNNER    name of this runner (default: 1). Two runners may share a ROOT, each with
#             its own cluster: give the second RUNNER=2 and its own GPUSHARE_STATE_DIR,
#             GPUSHARE_REPLAY_BIN and GPUSHARE_PORT_BASE (a free block: hack/lib/ports.sh); each
#             claims a cell before running it. On 2 cores two runners give about 1.25×
#             the cells per hour of one, at lower pods/s each. A killed runner leaves
#             its cell's .claim folder behind: remove it to have the cell run again.
#   OFFLINE   yes: no cluster; each cell is gpushare-replay --offline (the in-memory
#             emulation of the cluster path: random ties, --offline-cpu-pods extender),
#             about 30 s a cell; ROOT defaults to _output/replay-matrix-offline
#   DRA       with OFFLINE=yes, the GPU pods' cards asked in ResourceClaims and picked by
#             kube-scheduler's DRA allocator (gpushare-replay --offline-dra): alone (nodes
#             ranked by kube-scheduler's default scorers; POLICIES is ignored, the cells are
#             $ROOT/$TRACE/kube-scheduler-dra) or gpushare (POLICIES score the allocator's
#             placement, as the GPUShare plugin does; cells $ROOT/$TRACE/$POLICY-dra)
#   BOUND     yes (default; make bench-families: no): also the bound of each trace and seed
#             (gpushare-replay bound: the least unallocated GPU % any scheduler can reach,
#             bounded from below; about 30 s a cell on an idle core;
#             $ROOT/$TRACE/bound/seed$SEED/bound.json, skipped when there), in the family
#             tables beside the policies' results; no: none
# Any other hack/bench/replay.sh setting (TUNE, UNIT, REPLAY_ALL_PODS, ports) passes through.
set -o errexit -o nounset -o pipefail
{
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
POLICIES=${POLICIES:-binpack spread bestfit fgd}
TRACES=${TRACES:-default gpushare40 gpuspec10 multigpu20}
[ "$TRACES" = families ] && TRACES="cpu050 cpu100 cpu200 default gpushare40 gpushare60 gpushare80 gpuspec10 gpuspec20 gpuspec25 multigpu20 multigpu30 multigpu40"
SEEDS=${SEEDS:-42 43 44}
[ "$SEEDS" = 42-51 ] && SEEDS="42 43 44 45 46 47 48 49 50 51"
export STOP_AT=${STOP_AT:-100}
OFFLINE=${OFFLINE:-no}
export MODE=${MODE:-extender}
case $MODE in
extender) cell_suffix= ;;
plugin) cell_suffix=-plugin ;;
*)
  echo "MODE=$MODE: want extender or plugin" >&2
  exit 2
  ;;
esac
if [ "$OFFLINE" = yes ] && [ "$MODE" != extender ]; then
  # The offline emulation is pkg/policy in memory: no scheduler, so no plugin mode to emulate.
  echo "OFFLINE=yes runs no scheduler; MODE=$MODE does not apply" >&2
  exit 2
fi
DRA=${DRA:-}
case $DRA in
'') ;;
alone | gpushare)
  [ "$OFFLINE" = yes ] || {
    echo "DRA=$DRA needs OFFLINE=yes" >&2
    exit 2
  }
  cell_suffix=-dra
  [ "$DRA" = alone ] && POLICIES=kube-scheduler
  ;;
*)
  echo "DRA=$DRA: want alone or gpushare" >&2
  exit 2
  ;;
esac
if [ "$OFFLINE" = yes ]; then
  ROOT=${ROOT:-$REPO/_output/replay-matrix-offline}
  export GPUSHARE_REPLAY_BIN=${GPUSHARE_REPLAY_BIN:-$REPO/_output/replay-bin-offline}
  mkdir -p "$GPUSHARE_REPLAY_BIN"
  (cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$GPUSHARE_REPLAY_BIN/gpushare-replay" ./internal/bench/cmd/gpushare-replay)
fi
ROOT=${ROOT:-$REPO/_output/replay-matrix}
TRACES_DIR=${TRACES_DIR:-$(cd "$REPO/.." && pwd)/shared/traces/openb}
RUNNER=${RUNNER:-1} # names this runner's log, $ROOT/run-$RUNNER.log

# run_cell TRACE POLICY SEED OUT: one replay, on a cluster of its own or offline.
run_cell() {
  if [ "$OFFLINE" = yes ]; then
    local policy=(--policy "$2")
    [ "$DRA" = alone ] && policy=(--policy-label "$2")
    "$GPUSHARE_REPLAY_BIN/gpushare-replay" --offline "${policy[@]}" --seed "$3" \
      --offline-ties random --offline-cpu-pods extender ${DRA:+--offline-dra "$DRA"} \
      --tune "${TUNE:-1.3}" --unit "${UNIT:-milli}" --stop-at "$STOP_AT" --no-progress \
      --nodes "$TRACES_DIR/openb_node_list_gpu_node.csv" \
      --pods "$TRACES_DIR/openb_pod_list_$1.csv" --out "$4"
  else
    TRACE=$1 POLICY=$2 SEED=$3 OUT=$4 "$REPO/hack/bench/replay.sh"
  fi
}

mkdir -p "$ROOT"
failed=0
# Seed-major order: after the first pass every cell has one run.
for seed in $SEEDS; do
  for trace in $TRACES; do
    for policy in $POLICIES; do
      out=$ROOT/$trace/$policy$cell_suffix/seed$seed
      if [ -f "$out/summary.json" ]; then
        echo "[matrix] $trace $policy seed $seed: done before, skipped"
        continue
      fi
      # Claim the cell: runners started with other ports (GPUSHARE_PORT_BASE,
      # GPUSHARE_STATE_DIR, GPUSHARE_REPLAY_BIN) share one matrix, each cell run once.
      mkdir -p "$(dirname "$out")"
      mkdir "$out.claim" 2>/dev/null || { echo "[matrix] $trace $policy seed $seed: another runner has it"; continue; }
      echo "[matrix] $(date -u +%H:%M:%S) $trace $policy seed $seed ($MODE)"
      if ! run_cell "$trace" "$policy" "$seed" "$out" >"$ROOT/run-$RUNNER.log" 2>&1; then
        echo "[matrix] $trace $policy seed $seed FAILED; log: $out.log"
        mkdir -p "$(dirname "$out")" && cp "$ROOT/run-$RUNNER.log" "$out.log"
        rm -f "$out/summary.json" # a partial run must not count as a cell
        failed=$((failed + 1))
      else
        grep '^policy=' "$ROOT/run-$RUNNER.log" || true
      fi
      rmdir "$out.claim"
    done
  done
done

bin=${GPUSHARE_REPLAY_BIN:-$REPO/_output/replay-bin}/gpushare-replay
if [ "${BOUND:-yes}" = yes ]; then
  # The bound depends on the trace, seed and tune only: one per cell of every policy.
  for seed in $SEEDS; do
    for trace in $TRACES; do
      out=$ROOT/$trace/bound/seed$seed
      [ -f "$out/bound.json" ] && continue
      echo "[matrix] $(date -u +%H:%M:%S) $trace bound seed $seed"
      "$bin" bound --seed "$seed" --tune "${TUNE:-1.3}" --nodes "$TRACES_DIR/openb_node_list_gpu_node.csv" \
        --pods "$TRACES_DIR/openb_pod_list_$trace.csv" --out "$out" >"$ROOT/run-$RUNNER.log" 2>&1 ||
        { echo "[matrix] $trace bound seed $seed FAILED; log: $out.log"; mkdir -p "$out" && cp "$ROOT/run-$RUNNER.log" "$out.log"; failed=$((failed + 1)); }
    done
  done
fi
"$bin" table "$ROOT" | tee "$ROOT/table.md"
for trace in $TRACES; do
  runs=()
  for d in "$ROOT/$trace"/*/seed*; do
    [ -f "$d/summary.json" ] && runs+=("$d")
  done
  [ "${#runs[@]}" -gt 0 ] || continue
  # One line per policy, averaged over its seeds.
  "$bin" chart --title "$trace trace: allocated vs arrived GPU ($([ "$OFFLINE" = yes ] && echo offline emulation || echo "real schedulers: kube-scheduler + extender; cluster-plugin: gpushare-scheduler"))" \
    --out "$ROOT/chart-$trace.svg" "${runs[@]}"
done
# Each policy's trace-family table next to FGD's published figures (docs/design/benchmarks-replay.md).
# The mode recorded in the summaries (gpushare-replay: -to<STOP_AT> marks a cut workload).
fam_suffix=
[ "${STOP_AT:-0}" != 0 ] && fam_suffix=-to$STOP_AT
fam_mode=cluster$cell_suffix$fam_suffix
[ "$OFFLINE" = yes ] && fam_mode=offline-random-cpu-extender$fam_suffix
[ "$DRA" = gpushare ] && fam_mode=offline-random-cpu-extender-dra-gpushare$fam_suffix
[ "$DRA" = alone ] && fam_mode=offline-dra-alone-random$fam_suffix
for policy in $POLICIES; do
  "$bin" families --mode "$fam_mode" --policy "$policy" --chart "$ROOT/families-$policy$cell_suffix.svg" "$ROOT" >"$ROOT/families-$policy$cell_suffix.md" &&
    cat "$ROOT/families-$policy$cell_suffix.md" || echo "[matrix] no family table for $policy"
done
[ "$failed" = 0 ] || { echo "[matrix] $failed runs failed"; exit 1; }
exit
}
