package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ChurnRun is one churn result folder.
type ChurnRun struct {
	Dir     string
	Summary ChurnSummary
}

// CollectChurn reads every churn.json below dirs, sorted by trace (Families' order first),
// then scheduler, then seed.
func CollectChurn(dirs []string) ([]ChurnRun, error) {
	var runs []ChurnRun
	for _, root := range dirs {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "churn.json" {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("reading churn summary: %w", err)
			}
			var s ChurnSummary
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			runs = append(runs, ChurnRun{Dir: filepath.Dir(path), Summary: s})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	rank := func(trace string) int {
		if i := slices.Index(Families, trace); i >= 0 {
			return i
		}
		return len(Families)
	}
	slices.SortStableFunc(runs, func(a, b ChurnRun) int {
		x, y := a.Summary, b.Summary
		if d := rank(x.Trace) - rank(y.Trace); d != 0 {
			return d
		}
		if c := strings.Compare(x.Trace, y.Trace); c != 0 {
			return c
		}
		if c := strings.Compare(x.Scheduler, y.Scheduler); c != 0 {
			return c
		}
		return int(x.Seed - y.Seed)
	})
	return runs, nil
}

// WriteChurnTable writes one markdown row per run: trace, scheduler, seed, the offered load
// and the churn metrics (ChurnMetrics).
func WriteChurnTable(w io.Writer, runs []ChurnRun) error {
	var b strings.Builder
	b.WriteString("| trace | scheduler | seed | offered % | allocated % (mean) | free while GPU pods wait % | time with GPU pods waiting % | pending p50 s | pending p99 s | waited | never placed (GPU, no node fits) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		s := r.Summary
		fmt.Fprintf(&b, "| %s | %s | %d | %.1f | %.2f | %.2f | %.1f | %.0f | %.0f | %d | %d (%d, %d) |\n",
			s.Trace, s.Scheduler, s.Seed, s.OfferedLoadPct, s.AllocatedMeanPct, s.FreeWhileWaitingPct,
			s.WaitingTimePct, s.PendingP50, s.PendingP99, s.Waited, s.NeverPlaced, s.NeverPlacedGPU, s.NeverFit)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing churn table: %w", err)
	}
	return nil
}
