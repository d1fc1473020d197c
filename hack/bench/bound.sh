#!/usr/bin/env bash
# Computes the bound (internal/bench/bound: the least unallocated GPU % at 100 % arrived
# workload that any scheduler can reach, bounded from below) for traces × seeds, then prints
# the family table with it (docs/design/benchmarks-replay.md). No cluster; about 30 s a cell on
# an idle core. A cell whose bound.json exists is skipped, so an interrupted run resumes.
#
#   hack/bench/bound.sh                                 # the 13 families, seeds 42-51
#   TRACES="default gpushare80" SEEDS="42 43" hack/bench/bound.sh
#
# Settings (environment):
#   TRACES   (default: families: the 13 with FGD's published figures)
#   SEEDS    (default: 42-51: the FGD paper's ten)
#   TUNE     workload tuning, as the replay's (default: 1.3)
#   POLICY   whose offline results below ROOT the table shows beside the bound (default: fgd)
#   ROOT     result root (default: _output/replay-families-<commit>, make bench-families' own,
#            so that its results and the bound share one table); a bound goes to
#            $ROOT/$TRACE/bound/seed$SEED/bound.json
set -o errexit -o nounset -o pipefail
{
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TRACES=${TRACES:-families}
[ "$TRACES" = families ] && TRACES="cpu050 cpu100 cpu200 default gpushare40 gpushare60 gpushare80 gpuspec10 gpuspec20 gpuspec25 multigpu20 multigpu30 multigpu40"
SEEDS=${SEEDS:-42-51}
[ "$SEEDS" = 42-51 ] && SEEDS="42 43 44 45 46 47 48 49 50 51"
ROOT=${ROOT:-$REPO/_output/replay-families-$(git -C "$REPO" rev-parse --short HEAD)}
TRACES_DIR=${TRACES_DIR:-$(cd "$REPO/.." && pwd)/shared/traces/openb}
BIN=${GPUSHARE_REPLAY_BIN:-$REPO/_output/replay-bin-offline}
mkdir -p "$ROOT" "$BIN"
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$BIN/gpushare-replay" ./internal/bench/cmd/gpushare-replay)

failed=0
for seed in $SEEDS; do
  for trace in $TRACES; do
    out=$ROOT/$trace/bound/seed$seed
    [ -f "$out/bound.json" ] && continue
    if ! "$BIN/gpushare-replay" bound --seed "$seed" --tune "${TUNE:-1.3}" \
      --nodes "$TRACES_DIR/openb_node_list_gpu_node.csv" \
      --pods "$TRACES_DIR/openb_pod_list_$trace.csv" --out "$out" 2>"$ROOT/bound.log"; then
      echo "[bound] $trace seed $seed FAILED:" >&2
      cat "$ROOT/bound.log" >&2
      failed=$((failed + 1))
    fi
  done
done
"$BIN/gpushare-replay" families --policy "${POLICY:-fgd}" "$ROOT" | tee "$ROOT/families-bound.md"
[ "$failed" = 0 ] || { echo "[bound] $failed cells failed" >&2; exit 1; }
exit
}
