#!/usr/bin/env bash
# Holds whole cards back for whole-card pods, offline, over a grid of settings: the most a
# reservation could gain on each trace family (docs/design/benchmarks-replay.md, "Holding
# cards back"). Each cell is `gpushare-replay --offline --offline-reserve-cards K
# --offline-reserve-milli R` with the options of `OFFLINE=yes make bench-replay-matrix`.
#
#   hack/bench/reserve-scan.sh                         # 13 families × seeds 42 43 × the grid
#   TRACES=default SEEDS=42 CARDS="0 600" hack/bench/reserve-scan.sh
#
# Settings (environment):
#   TRACES    trace families (default: the 13 with FGD's published figures)
#   SEEDS     (default: 42 43)
#   CARDS     whole free cards below which pods are held back; 0 is the run without (default:
#             0 300 450 600 800 1000 1200 1400 1700 2000)
#   RANGES    held-back pods' gpu_milli, LO-HI (default: 500-999 800-999)
#   POLICY    (default: fgd)
#   JOBS      runs at once (default: 2)
#   ROOT      results (default: _output/reserve-scan): one folder a cell, results.tsv
#             (trace seed cards range unallocated%) and, printed too, per family the run
#             without, the best setting of the grid for that family and the best single setting
#             for all families
#   TRACES_DIR  the openb CSVs (default: ../shared/traces/openb)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
TRACES=${TRACES:-cpu050 cpu100 cpu200 default gpushare40 gpushare60 gpushare80 gpuspec10 gpuspec20 gpuspec25 multigpu20 multigpu30 multigpu40}
SEEDS=${SEEDS:-42 43}
CARDS=${CARDS:-0 300 450 600 800 1000 1200 1400 1700 2000}
RANGES=${RANGES:-500-999 800-999}
POLICY=${POLICY:-fgd}
JOBS=${JOBS:-2}
ROOT=${ROOT:-$REPO/_output/reserve-scan}
TRACES_DIR=${TRACES_DIR:-$(cd "$REPO/.." && pwd)/shared/traces/openb}
BIN=$REPO/_output/replay-bin-offline/gpushare-replay

mkdir -p "$ROOT" "$(dirname "$BIN")"
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$BIN" ./internal/bench/cmd/gpushare-replay)

# cell TRACE SEED CARDS RANGE: one run, skipped when its summary is there.
cell() {
  local out=$ROOT/$1/seed$2/reserve$3-$4
  if [ ! -f "$out/summary.json" ]; then
    "$BIN" --offline --policy "$POLICY" --seed "$2" --offline-ties random --offline-cpu-pods extender \
      --tune 1.3 --unit milli --stop-at 100 --no-progress \
      --offline-reserve-cards "$3" --offline-reserve-milli "$4" \
      --nodes "$TRACES_DIR/openb_node_list_gpu_node.csv" \
      --pods "$TRACES_DIR/openb_pod_list_$1.csv" --out "$out" >"$out.log" 2>&1 ||
      { echo "[reserve-scan] $1 seed $2 cards $3 range $4 failed: $out.log" >&2; return 1; }
  fi
  sed -n 's/.*"unallocated_pct_at_100": *\([0-9.]*\).*/\1/p' "$out/summary.json" |
    awk -v t="$1" -v s="$2" -v c="$3" -v r="$4" '{ printf "%s\t%s\t%s\t%s\t%.4f\n", t, s, c, r, $1 }'
}
export -f cell
export ROOT BIN POLICY TRACES_DIR

# grid: one line a cell, "TRACE SEED CARDS RANGE"; one run without (CARDS 0) per trace and seed.
grid() {
  for trace in $TRACES; do
    for seed in $SEEDS; do
      for cards in $CARDS; do
        if [ "$cards" = 0 ]; then
          echo "$trace $seed 0 ${RANGES%% *}"
          continue
        fi
        for range in $RANGES; do echo "$trace $seed $cards $range"; done
      done
    done
  done
}

# The cell's arguments expand in the child shell, hence the single quotes.
# shellcheck disable=SC2016
grid | xargs -P "$JOBS" -L 1 bash -c 'mkdir -p "$ROOT/$0/seed$1" && cell "$0" "$1" "$2" "$3"' >"$ROOT/results.tsv.tmp"
sort -k1,1 -k3,3n -k4,4 -k2,2n "$ROOT/results.tsv.tmp" >"$ROOT/results.tsv"
rm -f "$ROOT/results.tsv.tmp"

# Mean over seeds per trace and setting; per trace the run without and the best setting; then
# the setting with the best mean over all traces.
awk -F'\t' -v order="$TRACES" '
  { key = $1 SUBSEP ($3 == 0 ? "none" : $3 " " $4); sum[key] += $5; n[key]++
    traces[$1] = 1; if ($3 != 0) settings[$3 " " $4] = 1 }
  END {
    printf "%-12s %8s %8s  %s\n", "trace", "without", "best", "best setting (cards, gpu_milli)"
    nt = split(order, list, " ")
    for (i = 1; i <= nt; i++) {
      t = list[i]; if (!(t in traces)) continue
      base = sum[t, "none"] / n[t, "none"]; best = base; bs = "none"
      for (s in settings) if (n[t, s] && sum[t, s] / n[t, s] < best) { best = sum[t, s] / n[t, s]; bs = s }
      printf "%-12s %8.3f %8.3f  %s\n", t, base, best, bs
      allbase += base
    }
    uni = allbase; us = "none"
    for (s in settings) {
      tot = 0; ok = 1
      for (t in traces) { if (!n[t, s]) ok = 0; else tot += sum[t, s] / n[t, s] }
      if (ok && tot < uni) { uni = tot; us = s }
    }
    printf "mean of %d: without %.3f; best single setting %s: %.3f\n", nt, allbase / nt, us, uni / nt
  }' "$ROOT/results.tsv"
