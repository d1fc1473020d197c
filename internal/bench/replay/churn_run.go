package replay

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpushare/gpushare/pkg/policy"
)

// ChurnOptions configure one churn replay (gpushare-replay churn).
type ChurnOptions struct {
	NodesPath string // node CSV; rows without GPUs are skipped
	PodsPath  string // pod CSV
	// TimesPath is the CSV with the pods' creation_time and deletion_time, by name (empty:
	// PodsPath; the multigpu traces have no times and take the default trace's).
	TimesPath string
	Timing    ChurnTiming
	Seed      int64 // the workload's shuffle and tuning, random ties, borrowed times
	// Tune appends clones of trace pods until the GPU request reaches this multiple of
	// capacity (buildWorkload; <= 0: the trace as is).
	Tune   float64
	Unit   UnitMode
	Limit  int    // replay only the first Limit pods in arrival order (0: all)
	Label  string // the scheduler's name in the results
	Policy string // the policy (not used with DRA DRAAlone)
	// Ties, CPUPods and DRA: see offlineConfig.
	Ties, CPUPods, DRA string
	OutDir             string
}

// ChurnSummary is the result of one churn replay (churn.json).
type ChurnSummary struct {
	Scheduler      string  `json:"scheduler"`
	Policy         string  `json:"policy,omitempty"`
	DRA            string  `json:"dra,omitempty"`
	Ties           string  `json:"ties"`
	CPUPods        string  `json:"cpu_pods,omitempty"`
	Trace          string  `json:"trace"`
	Seed           int64   `json:"seed"`
	Tune           float64 `json:"tune"`
	ArrivalFactor  float64 `json:"arrival_factor"`
	DurationFactor float64 `json:"duration_factor"`
	// Borrowed: pods without times of their own (see buildChurnStream).
	Borrowed      int   `json:"borrowed_times"`
	CapacityMilli int64 `json:"gpu_capacity_milli"`
	// OfferedLoadPct: the GPU request × run time of all pods over the arrival window and
	// the capacity, %: the mean allocated share with infinite room.
	OfferedLoadPct float64 `json:"offered_load_pct"`
	// WindowFrom is when the metrics' window opens (churnWindow), replay seconds.
	WindowFrom float64 `json:"window_from_s"`
	ChurnMetrics
	WallSeconds float64   `json:"wall_seconds"`
	Started     time.Time `json:"started"`
}

// ChurnStreamOf reads the trace and returns its churn stream, the GPU nodes and how many
// pods borrowed times. The pods are the workload of buildWorkload (seeded shuffle, tuning
// clones) sorted by arrival, the shuffle's order on equal times. The same stream can drive a replay on a cluster:
// create each pod at Arrive, delete it Duration after it is bound.
func ChurnStreamOf(o ChurnOptions) ([]ChurnPod, []NodeSpec, int, error) {
	all, err := readNodesFile(o.NodesPath)
	if err != nil {
		return nil, nil, 0, err
	}
	var nodes []NodeSpec
	for _, n := range all {
		if n.GPUs > 0 {
			nodes = append(nodes, n)
		}
	}
	pods, err := readPodsFile(o.PodsPath)
	if err != nil {
		return nil, nil, 0, err
	}
	timesPath := o.TimesPath
	if timesPath == "" {
		timesPath = o.PodsPath
	}
	byName, rows, err := readPodTimesFile(timesPath)
	if err != nil {
		return nil, nil, 0, err
	}
	pods, _, err = buildWorkload(pods, totalGPUMilli(nodes), o.Seed, o.Tune)
	if err != nil {
		return nil, nil, 0, err
	}
	stream, borrowed, err := buildChurnStream(pods, byName, rows, o.Timing, o.Seed)
	if err != nil {
		return nil, nil, 0, err
	}
	if o.Limit > 0 && o.Limit < len(stream) {
		stream = stream[:o.Limit]
	}
	return stream, nodes, borrowed, nil
}

// RunChurn replays the trace under churn (replayChurn) and writes churn.json,
// churn-series.csv and churn-stream.csv to o.OutDir.
func RunChurn(ctx context.Context, o ChurnOptions) (ChurnSummary, error) {
	stream, nodes, borrowed, err := ChurnStreamOf(o)
	if err != nil {
		return ChurnSummary{}, err
	}
	units, err := newUnits(o.Unit, nodes)
	if err != nil {
		return ChurnSummary{}, err
	}
	cfg := offlineConfig{Units: units, Ties: o.Ties, Seed: o.Seed, CPUPods: o.CPUPods, DRA: o.DRA}
	if o.DRA != DRAAlone {
		if cfg.Policy, err = policy.New(o.Policy); err != nil {
			return ChurnSummary{}, err
		}
	}
	first, last := churnWindow(stream)
	start := time.Now()
	res, err := replayChurn(ctx, cfg, nodes, stream)
	if err != nil {
		return ChurnSummary{}, err
	}
	s := ChurnSummary{
		Scheduler: o.Label, Policy: o.Policy, DRA: o.DRA, Ties: o.Ties, CPUPods: o.CPUPods,
		Trace: traceName(o.PodsPath), Seed: o.Seed, Tune: o.Tune, ArrivalFactor: o.Timing.ArrivalFactor,
		DurationFactor: o.Timing.DurationFactor, Borrowed: borrowed, CapacityMilli: res.CapacityMilli,
		ChurnMetrics: churnMetrics(res, len(stream), first, last),
		WallSeconds:  time.Since(start).Seconds(), Started: start.UTC().Truncate(time.Second),
	}
	if o.DRA == DRAAlone {
		s.Policy = ""
	}
	s.OfferedLoadPct = offeredLoad(stream, res.CapacityMilli)
	s.WindowFrom = first
	return s, writeChurn(o.OutDir, s, res, stream)
}

// offeredLoad is the GPU-milli × seconds that the pods would hold within the arrival
// window (churnWindow) if each ran from its arrival, over the window and capacity, %
// (0 for a window of no length).
func offeredLoad(stream []ChurnPod, capacity int64) float64 {
	first, last := churnWindow(stream)
	window := last - first
	if window <= 0 {
		return 0
	}
	var area float64
	for _, p := range stream {
		from, to := math.Max(p.Arrive, first), math.Min(p.Arrive+p.Duration, last)
		if to > from {
			area += float64(p.TotalGPUMilli()) * (to - from)
		}
	}
	return 100 * area / window / float64(capacity)
}

// writeChurn writes the result files.
func writeChurn(dir string, s ChurnSummary, res churnResult, stream []ChurnPod) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating result folder: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding churn summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "churn.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing churn summary: %w", err)
	}
	pct := func(milli int64) string {
		return strconv.FormatFloat(100*float64(milli)/float64(res.CapacityMilli), 'f', 4, 64)
	}
	series := [][]string{{"time_s", "allocated_pct", "pending_pods", "pending_gpu_pct"}}
	for _, x := range res.Samples {
		series = append(series, []string{ftoa(x.Time), pct(x.AllocatedMilli), strconv.Itoa(x.PendingPods), pct(x.PendingGPUMilli)})
	}
	// The stream is the input a cluster driver would replay; node is this run's placement.
	events := [][]string{{"pod", "arrive_s", "duration_s", "num_gpu", "gpu_milli", "node"}}
	for i, p := range stream {
		events = append(events, []string{p.Name, ftoa(p.Arrive), ftoa(p.Duration), strconv.Itoa(p.NumGPU), strconv.FormatInt(p.GPUMilli, 10), res.Nodes[i]})
	}
	return errors.Join(writeCSV(filepath.Join(dir, "churn-series.csv"), series), writeCSV(filepath.Join(dir, "churn-stream.csv"), events))
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// writeCSV writes rows to path.
func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
