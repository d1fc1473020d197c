package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gpushare/gpushare/internal/bench/bound"
)

// BoundSummary is bound.json: the lower bound (internal/bench/bound) on the unallocated GPU %
// at 100 % arrived workload for one trace and seed, computed from the pods the replay of
// the same trace, seed and tune submits up to the 100 % point.
type BoundSummary struct {
	Trace string  `json:"trace"`
	Seed  int64   `json:"seed"`
	Tune  float64 `json:"tune"`
	Pods  int     `json:"pods"` // arrived pods, CPU-only ones included
	// BoundPct: no scheduler leaves less GPU unallocated with these pods, in % of capacity.
	BoundPct float64 `json:"bound_pct"`
	// PlainPct: the linear program's bound without cuts.
	PlainPct    float64 `json:"plain_pct"`
	Rounds      int     `json:"rounds"`
	Cuts        int     `json:"cuts"`
	PodClasses  int     `json:"pod_classes"`
	NodeClasses int     `json:"node_classes"`
	SigBits     int     `json:"sig_bits"` // pods' cpu and memory rounded down to so many binary digits (-1: exact)
	Stop        string  `json:"stop"`     // why the rounds of cuts ended (bound.Result.Stop)
	WallSeconds float64 `json:"wall_seconds"`
}

// RunBound builds the workload as a replay with o does (o.StopAtPct is taken as 100, o.Limit
// as 0), computes the bound over the arrived pods and writes bound.json into o.OutDir.
// Errors: reading the CSVs, building the workload, the bound, writing.
func RunBound(ctx context.Context, o Options, bo bound.Options) (BoundSummary, error) {
	o.StopAtPct, o.Limit = 100, 0
	pr, err := prepare(o)
	if err != nil {
		return BoundSummary{}, err
	}
	start := time.Now()
	res, err := bound.Compute(ctx, boundNodes(pr.Nodes), boundPods(pr.Pods), bo)
	if err != nil {
		return BoundSummary{}, fmt.Errorf("trace %s seed %d: %w", pr.Trace, o.Seed, err)
	}
	s := BoundSummary{
		Trace: pr.Trace, Seed: o.Seed, Tune: o.Tune, Pods: len(pr.Pods),
		BoundPct: res.UnallocatedPct, PlainPct: res.PlainPct, Rounds: res.Rounds, Cuts: res.Cuts,
		PodClasses: res.PodClasses, NodeClasses: res.NodeClasses, SigBits: res.SigBits, Stop: res.Stop,
		WallSeconds: time.Since(start).Seconds(),
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return s, fmt.Errorf("creating result folder: %w", err)
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return s, fmt.Errorf("encoding bound: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, "bound.json"), append(js, '\n'), 0o644); err != nil {
		return s, fmt.Errorf("writing bound: %w", err)
	}
	return s, nil
}

// Line is the one-line report of the bound.
func (s BoundSummary) Line() string {
	return fmt.Sprintf("bound trace=%s seed=%d pods=%d bound=%.2f%% plain=%.2f%% rounds=%d cuts=%d classes=%d×%d sigbits=%d stop=%q wall=%.1fs",
		s.Trace, s.Seed, s.Pods, s.BoundPct, s.PlainPct, s.Rounds, s.Cuts, s.PodClasses, s.NodeClasses, s.SigBits, s.Stop, s.WallSeconds)
}

// CollectBounds finds every bound.json under the given folders and returns, per trace, the
// cell of their bounds (mean and sd over the seeds).
func CollectBounds(roots []string) (map[string]*Cell, error) {
	vals := map[string][]float64{}
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "bound.json" {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var s BoundSummary
			if err := json.Unmarshal(b, &s); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			// A file without the figure would count as a bound of 0.
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(b, &keys); err != nil || keys["bound_pct"] == nil || s.Trace == "" {
				return fmt.Errorf("%s: not a bound: no trace or bound_pct", path)
			}
			vals[s.Trace] = append(vals[s.Trace], s.BoundPct)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("collecting bounds: %w", err)
		}
	}
	out := map[string]*Cell{}
	for tr, v := range vals {
		c := &Cell{Runs: len(v)}
		c.Mean, c.SD = meanSD(v)
		out[tr] = c
	}
	return out, nil
}

// boundNodes and boundPods convert the trace's rows for the bound.
func boundNodes(nodes []NodeSpec) []bound.Node {
	out := make([]bound.Node, len(nodes))
	for i, n := range nodes {
		out[i] = bound.Node{Model: n.Model, Cards: n.GPUs, MilliCPU: n.MilliCPU, MemoryMiB: n.MemoryMiB}
	}
	return out
}

func boundPods(pods []PodSpec) []bound.Pod {
	out := make([]bound.Pod, len(pods))
	for i, p := range pods {
		out[i] = bound.Pod{NumGPU: p.NumGPU, GPUMilli: p.GPUMilli, MilliCPU: p.MilliCPU, MemoryMiB: p.MemoryMiB, Models: p.GPUSpec}
	}
	return out
}
