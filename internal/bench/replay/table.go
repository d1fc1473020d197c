package replay

import (
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"sort"
	"strings"
)

// paperDefault is the FGD paper's unallocated GPU % at 100 % arrival on the default trace
// (mean of seeds 42..51), by policy name.
var paperDefault = map[string]float64{
	"random": 13.70, "dotprod": 9.38, "gpuclustering": 8.35, "gpupacking": 8.22, "bestfit": 7.14, "fgd": 4.77,
}

// Cell aggregates the runs of one (mode, trace, policy).
type Cell struct {
	Runs       int
	Mean, SD   float64 // unallocated % at 100 % arrival, over the runs that reached it
	PodsPerSec float64 // mean
}

// Table is mode → policy → trace → cell.
type Table map[string]map[string]map[string]*Cell

// CollectSummaries finds every summary.json under the given folders.
func CollectSummaries(roots []string) ([]Summary, error) {
	var out []Summary
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || d.Name() != "summary.json" {
				return nil
			}
			s, err := readSummary(filepath.Dir(path))
			if err != nil {
				return err
			}
			out = append(out, s)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("collecting results: %w", err)
		}
	}
	return out, nil
}

// Aggregate groups summaries by mode, policy and trace.
func Aggregate(ss []Summary) Table {
	vals := map[[3]string][]float64{}
	pps := map[[3]string][]float64{}
	for _, s := range ss {
		k := [3]string{s.Mode, s.Policy, s.Trace}
		if s.UnallocatedAt100 != nil {
			vals[k] = append(vals[k], *s.UnallocatedAt100)
		}
		pps[k] = append(pps[k], s.PodsPerSec)
	}
	t := Table{}
	for k, p := range pps {
		c := &Cell{Runs: len(vals[k])}
		c.Mean, c.SD = meanSD(vals[k])
		c.PodsPerSec, _ = meanSD(p)
		if t[k[0]] == nil {
			t[k[0]] = map[string]map[string]*Cell{}
		}
		if t[k[0]][k[1]] == nil {
			t[k[0]][k[1]] = map[string]*Cell{}
		}
		t[k[0]][k[1]][k[2]] = c
	}
	return t
}

func meanSD(v []float64) (mean, sd float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) > 1 {
		for _, x := range v {
			sd += (x - mean) * (x - mean)
		}
		sd = math.Sqrt(sd / float64(len(v)-1))
	}
	return mean, sd
}

// WriteMarkdown writes one table per mode: a row per policy, a column per trace ("default"
// first) with "mean ± sd (runs)" of unallocated % at 100 % arrival, then the policy's mean
// pods/s and the FGD paper's default-trace figure.
func (t Table) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	for _, mode := range sortedKeys(t) {
		policies := t[mode]
		traceSet := map[string]bool{}
		for _, byTrace := range policies {
			for tr := range byTrace {
				traceSet[tr] = true
			}
		}
		traces := sortedKeys(traceSet)
		sort.SliceStable(traces, func(i, j int) bool { return traces[i] == "default" && traces[j] != "default" })
		fmt.Fprintf(&b, "Mode `%s`: unallocated GPU %% at 100 %% arrived workload, mean ± sd (runs)\n\n", mode)
		fmt.Fprintf(&b, "| policy | %s | pods/s | paper, default |\n|---|%s---|---|\n", strings.Join(traces, " | "), strings.Repeat("---|", len(traces)))
		for _, pol := range sortedKeys(policies) {
			fmt.Fprintf(&b, "| %s |", pol)
			var rate []float64
			for _, tr := range traces {
				c := policies[pol][tr]
				switch {
				case c == nil:
					b.WriteString(" – |")
					continue
				case c.Runs == 0:
					b.WriteString(" n/a |")
				case c.Runs == 1:
					fmt.Fprintf(&b, " %.2f (1) |", c.Mean)
				default:
					fmt.Fprintf(&b, " %.2f ± %.2f (%d) |", c.Mean, c.SD, c.Runs)
				}
				rate = append(rate, c.PodsPerSec)
			}
			m, _ := meanSD(rate)
			paper := "–"
			if v, ok := paperDefault[strings.ToLower(pol)]; ok {
				paper = fmt.Sprintf("%.2f", v)
			}
			fmt.Fprintf(&b, " %.1f | %s |\n", m, paper)
		}
		b.WriteString("\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
