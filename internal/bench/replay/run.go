package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/metrics"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// Options configure one replay (the gpushare-replay flags).
type Options struct {
	NodesPath string   // node CSV; rows without GPUs are skipped
	PodsPath  string   // pod CSV
	Seed      int64    // shuffle and tuning seed (the paper uses 42..51)
	Tune      float64  // tune the GPU request to this multiple of capacity (<= 0: as is)
	Unit      UnitMode // milli or gib
	Limit     int      // replay only the first Limit pods of the workload (0: all)
	// StopAtPct ends the workload with the pod whose arrival brings the submitted GPU
	// request to this percent of capacity (0: no cut). Arrival only, no departures: the
	// state at 100 % does not depend on later pods, so 100 gives the paper's figure without
	// the slow tail of failing clones.
	StopAtPct   float64
	OutDir      string // where summary.json and steps.csv go
	PolicyLabel string // the policy's name in the results
	Namespace   string // namespace of the replay pods
	StepEvery   int    // write every n-th step to steps.csv
	MetricsURL  string // extender /metrics ("" skips latencies)
	// MetricsTLS is the client certificate and CA for MetricsURL (mutual TLS).
	MetricsTLS metrics.TLSFiles
	PodTimeout time.Duration
	Progress   io.Writer // progress bar; nil for none
	// SchedulerName is the replay pods' spec.schedulerName (empty: the default scheduler).
	SchedulerName string
	// ModeSuffix is appended to the mode recorded in the results ("cluster-<suffix>"), to
	// tell runs of different set-ups apart (hack/bench/replay.sh: "allpods").
	ModeSuffix string
	// OfflineTies and OfflineCPUPods: see offlineConfig (offline runs only).
	OfflineTies    string
	OfflineCPUPods string
	// OfflineDRA: "" for the device-plugin path, DRAAlone or DRAGPUShare (offline runs only).
	OfflineDRA string
	// OfflineDefrag: the defragmenter's budget of moves per pod that fits nowhere (offline
	// device-plugin runs only; 0: none). See defragmenter.
	OfflineDefrag int
	// OfflineReserve: whole cards held back for whole-card pods (offline device-plugin runs
	// only; the zero value: none). See Reservation.
	OfflineReserve Reservation
	// DRA (cluster runs): the nodes publish ResourceSlices and the GPU pods ask their cards in
	// ResourceClaims (Objects.DRA); the allocated GPU is read from the claims.
	DRA bool
}

// prepared is the parsed and tuned input of a replay.
type prepared struct {
	Nodes []NodeSpec // GPU nodes only
	Pods  []PodSpec  // in submission order
	Units Units
	Stats workloadStats
	Trace string // short trace name, e.g. "default"
}

// prepare reads the CSVs and builds the workload.
func prepare(o Options) (prepared, error) {
	var pr prepared
	all, err := readNodesFile(o.NodesPath)
	if err != nil {
		return pr, err
	}
	for _, n := range all {
		if n.GPUs > 0 {
			pr.Nodes = append(pr.Nodes, n)
		}
	}
	if len(pr.Nodes) == 0 {
		return pr, fmt.Errorf("%s: no GPU nodes", o.NodesPath)
	}
	trace, err := readPodsFile(o.PodsPath)
	if err != nil {
		return pr, err
	}
	if pr.Units, err = newUnits(o.Unit, pr.Nodes); err != nil {
		return pr, err
	}
	pr.Pods, pr.Stats, err = buildWorkload(trace, totalGPUMilli(pr.Nodes), o.Seed, o.Tune)
	if err != nil {
		return pr, err
	}
	if o.StopAtPct > 0 {
		pr.Pods = cutAtArrived(pr.Pods, totalGPUMilli(pr.Nodes), o.StopAtPct)
	}
	if o.Limit > 0 && o.Limit < len(pr.Pods) {
		pr.Pods = pr.Pods[:o.Limit]
	}
	pr.Trace = traceName(o.PodsPath)
	klog.InfoS("workload ready", "trace", pr.Trace, "nodes", len(pr.Nodes), "pods", len(pr.Pods),
		"original", pr.Stats.Original, "clones", pr.Stats.Clones, "removed", pr.Stats.Removed,
		"requestPct", fmt.Sprintf("%.1f", 100*float64(pr.Stats.RequestMilli)/float64(pr.Stats.CapacityMilli)))
	return pr, nil
}

// traceName shortens "…/openb_pod_list_gpushare40.csv" to "gpushare40".
func traceName(path string) string {
	b := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return strings.TrimPrefix(b, "openb_pod_list_")
}

func (o Options) summary(pr prepared, mode string, rec *recorder, wall time.Duration) Summary {
	s := newSummary(rec, wall)
	if o.ModeSuffix != "" {
		mode += "-" + o.ModeSuffix
	}
	if o.StopAtPct > 0 {
		// A cut workload has no failing tail, so its pods/s must not mix with full runs'.
		mode += fmt.Sprintf("-to%g", o.StopAtPct)
	}
	s.Policy, s.Trace, s.Mode, s.Seed, s.Tune, s.Unit = o.PolicyLabel, pr.Trace, mode, o.Seed, o.Tune, string(o.Unit)
	s.Started = time.Now().Add(-wall).UTC().Truncate(time.Second)
	return s
}

// objects builds the replay's nodes and pods with these options' namespace and scheduler.
func (o Options) objects(u Units) Objects {
	return Objects{Units: u, Resources: gpushare.DefaultResources(), Namespace: o.Namespace, SchedulerName: o.SchedulerName, DRA: o.DRA}
}

// RunCluster replays against the cluster behind client and writes the results. The
// summary is returned (and written) also when the run stopped early with an error, so a
// partial run leaves its steps behind.
func RunCluster(ctx context.Context, client kubernetes.Interface, o Options) (Summary, error) {
	pr, err := prepare(o)
	if err != nil {
		return Summary{}, err
	}
	d := &driver{
		Client:     client,
		Objects:    o.objects(pr.Units),
		PodTimeout: o.PodTimeout,
		progress:   o.Progress,
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return Summary{}, fmt.Errorf("creating result folder: %w", err)
	}
	httpc, err := metrics.NewClient(10*time.Second, o.MetricsTLS)
	if err != nil {
		return Summary{}, err
	}
	before, err := o.scrape(ctx, httpc, "before")
	if err != nil {
		klog.ErrorS(err, "extender metrics unavailable; latencies will be missing")
	}
	rec := newRecorder(totalGPUMilli(pr.Nodes))
	res, runErr := d.Run(ctx, pr.Nodes, pr.Pods, rec)
	s := o.summary(pr, "cluster", rec, res.Wall)
	if before != nil {
		if after, err := o.scrape(context.WithoutCancel(ctx), httpc, "after"); err != nil {
			klog.ErrorS(err, "extender metrics unavailable after the run")
		} else if after != nil {
			s.SetLatencies(*before, *after)
		}
	}
	if len(res.E2E) > 0 {
		if s.Latencies == nil {
			s.Latencies = map[string]metrics.Latency{}
		}
		s.Latencies["e2e"] = metrics.Of(res.E2E)
	}
	if err := writeResults(o.OutDir, s, rec, o.StepEvery); err != nil {
		return s, errors.Join(runErr, err)
	}
	return s, runErr
}

// scrape reads the extender's /metrics, keeps a copy as extender-metrics-<when>.txt in the
// result folder (rejection and failure counters help explain failed pods) and returns it
// parsed. No URL: nil, nil.
func (o Options) scrape(ctx context.Context, c *http.Client, when string) (*metrics.Scrape, error) {
	if o.MetricsURL == "" {
		return nil, nil
	}
	body, err := metrics.Fetch(ctx, c, o.MetricsURL)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.OutDir, "extender-metrics-"+when+".txt"), body, 0o644); err != nil {
		return nil, fmt.Errorf("saving metrics: %w", err)
	}
	s, err := metrics.Parse(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", o.MetricsURL, err)
	}
	return &s, nil
}

// RunOffline replays with the named policy in memory and writes the results.
// With o.OfflineDRA DRAAlone no policy is used, and policyName may be empty.
func RunOffline(ctx context.Context, policyName string, o Options) (Summary, error) {
	var pol policy.Policy
	if o.OfflineDRA != DRAAlone {
		var err error
		if pol, err = policy.New(policyName); err != nil {
			return Summary{}, err
		}
	}
	pr, err := prepare(o)
	if err != nil {
		return Summary{}, err
	}
	rec := newRecorder(totalGPUMilli(pr.Nodes))
	cfg := offlineConfig{Policy: pol, Units: pr.Units, Ties: o.OfflineTies, Seed: o.Seed, CPUPods: o.OfflineCPUPods, DRA: o.OfflineDRA, Defrag: o.OfflineDefrag, Reserve: o.OfflineReserve}
	wall, runErr := replayOffline(ctx, cfg, pr.Nodes, pr.Pods, rec, o.Progress)
	s := o.summary(pr, o.offlineMode(), rec, wall)
	if err := writeResults(o.OutDir, s, rec, o.StepEvery); err != nil {
		return s, errors.Join(runErr, err)
	}
	return s, runErr
}

// offlineMode is the mode an offline run records: "offline", "offline-<ties>" with random
// ties, "-cpu-<CPU-only pods>" unless first fit, and the DRA emulation as "offline-dra-alone"
// (ties, no CPU-only pod setting: it has none) or "-dra-gpushare" after the rest, and
// "-defrag<budget>" with a defragmenter or Reservation's suffix with a reservation.
func (o Options) offlineMode() string {
	random := o.OfflineTies == TiesRandom || o.OfflineTies == TiesRandomScore
	if o.OfflineDRA == DRAAlone {
		if random {
			return "offline-dra-alone-" + o.OfflineTies
		}
		return "offline-dra-alone"
	}
	mode := "offline"
	if random {
		mode = "offline-" + o.OfflineTies
		if o.OfflineCPUPods != "" && o.OfflineCPUPods != CPUFirstFit {
			mode += "-cpu-" + o.OfflineCPUPods
		}
	}
	if o.OfflineDRA != "" {
		mode += "-dra-" + o.OfflineDRA
	}
	if o.OfflineDefrag > 0 {
		mode += fmt.Sprintf("-defrag%d", o.OfflineDefrag)
	}
	return mode + o.OfflineReserve.String()
}
