// Command gpushare-replay replays Alibaba's GPU-sharing trace through the real scheduler
// (kube-scheduler + the gpushare extender, kwok nodes) or offline through pkg/policy, and
// charts the results. See docs/design/benchmarks-replay.md.
//
//	gpushare-replay --kubeconfig K --nodes N.csv --pods P.csv --seed 42 --tune 1.3 --out DIR --policy-label binpack
//	gpushare-replay --offline --policy binpack --nodes N.csv --pods P.csv --out DIR
//	gpushare-replay chart --out chart.svg DIR...
//	gpushare-replay table DIR...    # markdown table of every summary.json below DIR
//	gpushare-replay families [--mode M --policy fgd --chart f.svg] DIR...
//	                                # the 13 trace families against FGD's published figures
//	gpushare-replay bound --nodes N.csv --pods P.csv --seed 42 --out DIR
//	                                # the least unallocated GPU % any scheduler can reach, bounded
//	gpushare-replay churn --policy fgd --nodes N.csv --pods P.csv --out DIR
//	                                # offline under churn: pods leave, a pending queue
//	gpushare-replay churn-report [--chart f.svg --trace default] DIR...
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/bound"
	"github.com/gpushare/gpushare/internal/bench/replay"
	"github.com/gpushare/gpushare/internal/flagenv"
)

type flagpole struct {
	replay.Options
	kubeconfig string
	unit       string
	offline    bool
	policy     string
	qps        float32
	burst      int
	noProgress bool
	// reserveRange is --offline-reserve-milli, parsed into Options.OfflineReserve.
	reserveRange string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "gpushare-replay:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	f := &flagpole{}
	cmd := &cobra.Command{
		Use:           "gpushare-replay",
		Short:         "Replay the openb GPU-sharing trace and measure GPU allocation",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagenv.Apply(cmd.Flags()); err != nil {
				return err
			}
			return runE(cmd.Context(), f)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the replay cluster")
	fs.StringVar(&f.NodesPath, "nodes", "", "node CSV (openb_node_list_gpu_node.csv)")
	fs.StringVar(&f.PodsPath, "pods", "", "pod CSV (openb_pod_list_*.csv)")
	fs.Int64Var(&f.Seed, "seed", 42, "shuffle and tuning seed (the FGD paper uses 42..51)")
	fs.Float64Var(&f.Tune, "tune", 1.3, "append clones until the GPU request reaches this multiple of capacity (0: no tuning)")
	fs.StringVar(&f.unit, "unit", string(replay.UnitMilli), "gpu-mem unit: milli (1000 per card, exact) or gib (model memory, approximate)")
	fs.IntVar(&f.Limit, "limit", 0, "replay only the first N pods of the workload (0: all)")
	fs.Float64Var(&f.StopAtPct, "stop-at", 0, "end the workload once the submitted GPU request reaches this percent of capacity (100: the paper's figure, without the failing tail; 0: all)")
	fs.StringVar(&f.OutDir, "out", "", "result folder (summary.json, steps.csv)")
	fs.StringVar(&f.PolicyLabel, "policy-label", "", "policy name recorded in the results (default: --policy)")
	fs.StringVar(&f.Namespace, "namespace", "replay", "namespace of the replay pods")
	fs.IntVar(&f.StepEvery, "step-every", 1, "write every N-th step to steps.csv")
	fs.StringVar(&f.SchedulerName, "scheduler-name", "", "spec.schedulerName of the replay pods, e.g. gpushare-scheduler (empty: the default scheduler)")
	fs.StringVar(&f.ModeSuffix, "mode-suffix", "", "appended to the recorded mode (cluster-<suffix>) to tell set-ups apart")
	fs.StringVar(&f.MetricsURL, "metrics-url", "https://127.0.0.1:12346/metrics", "extender /metrics (its diagnostics listener) for latency percentiles (empty: skip)")
	fs.StringVar(&f.MetricsTLS.CertFile, "extender-client-cert", "", "client certificate presented to the extender's diagnostics listener (mutual TLS)")
	fs.StringVar(&f.MetricsTLS.KeyFile, "extender-client-key", "", "key of --extender-client-cert")
	fs.StringVar(&f.MetricsTLS.CAFile, "extender-ca", "", "CA bundle that verifies the extender's serving certificate")
	fs.DurationVar(&f.PodTimeout, "pod-timeout", 2*time.Minute, "fail the run when a pod is neither bound nor unschedulable after this")
	fs.Float32Var(&f.qps, "qps", 1000, "client QPS to the API server")
	fs.IntVar(&f.burst, "burst", 2000, "client burst to the API server")
	fs.BoolVar(&f.offline, "offline", false, "place pods with pkg/policy in memory, no cluster")
	fs.StringVar(&f.policy, "policy", "", "policy for --offline (binpack, spread, ...)")
	fs.StringVar(&f.OfflineTies, "offline-ties", replay.TiesFirst, "--offline node choice: first (best score, lowest index), random (the cluster path: normalized scores, random ties) or random-score (each node's standalone 0..10 score, random ties)")
	fs.StringVar(&f.OfflineCPUPods, "offline-cpu-pods", replay.CPUFirstFit, "--offline-ties random*: CPU-only pods go first-fit (as the replay cluster), random (extender scores them alike), ranked (by the policy) or extender (what the extender does with REPLAY_ALL_PODS=yes: ranked for fgd, random otherwise)")
	fs.BoolVar(&f.DRA, "dra", false, "cluster run: publish a ResourceSlice per node (driver gpu-mem.gpushare.io) and the DeviceClass, and give each GPU pod a ResourceClaim instead of gpu-mem; the allocated GPU is read from the claims")
	fs.StringVar(&f.OfflineDRA, "offline-dra", "", "--offline: place GPU pods as kube-scheduler's DRA path does, the allocator taking the first cards with room: alone (kube-scheduler's default scorers rank nodes by cpu and memory; --policy not used) or gpushare (--policy scores the allocator's placement on each node, as the GPUShare plugin does); empty: the device-plugin path")
	fs.IntVar(&f.OfflineDefrag, "offline-defrag", 0, "--offline: when a GPU pod fits nowhere, move at most this many GPU pods of one node to other nodes to make room for it, each move counted as an eviction (the most a defragmenter could gain; device-plugin path only); 0: none")
	fs.IntVar(&f.OfflineReserve.Cards, "offline-reserve-cards", 0, "--offline: while fewer than this many cards of the cluster hold no pod, single-card pods of --offline-reserve-milli may only go onto cards that hold one, and fail where none has room (the most holding cards back for whole-card pods could gain; device-plugin path only); 0: none")
	fs.StringVar(&f.reserveRange, "offline-reserve-milli", "500-999", "--offline-reserve-cards: the restricted pods' gpu_milli, LO-HI inclusive")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no progress bar on stderr")
	// GPUSHARE_REPLAY_<FLAG> is what the replay read before the shared convention.
	flagenv.Bind(fs, flagenv.LegacyPrefix("GPUSHARE_REPLAY_"))
	cmd.AddCommand(newChartCommand(), newTableCommand(), newFamiliesCommand(), newBoundCommand(), newChurnCommand(), newChurnReportCommand())
	return cmd
}

func runE(ctx context.Context, f *flagpole) error {
	f.Unit = replay.UnitMode(f.unit)
	if err := f.OfflineReserve.ParseReservationRange(f.reserveRange); err != nil {
		return fmt.Errorf("--offline-reserve-milli: %w", err)
	}
	if f.NodesPath == "" || f.PodsPath == "" || f.OutDir == "" {
		return fmt.Errorf("--nodes, --pods and --out are required")
	}
	if f.PolicyLabel == "" {
		f.PolicyLabel = f.policy
	}
	if f.PolicyLabel == "" && f.offline && f.OfflineDRA == replay.DRAAlone {
		f.PolicyLabel = "kube-scheduler"
	}
	if f.PolicyLabel == "" {
		return fmt.Errorf("--policy-label is required (the extender's policy, for the results)")
	}
	if !f.noProgress {
		f.Progress = os.Stderr
	}
	var s replay.Summary
	var err error
	if f.offline {
		if f.policy == "" && f.OfflineDRA != replay.DRAAlone {
			f.policy = f.PolicyLabel
		}
		s, err = replay.RunOffline(ctx, f.policy, f.Options)
	} else {
		if f.kubeconfig == "" {
			return fmt.Errorf("--kubeconfig is required (or --offline)")
		}
		client, cerr := newClient(f.kubeconfig, f.qps, f.burst)
		if cerr != nil {
			return cerr
		}
		s, err = replay.RunCluster(ctx, client, f.Options)
	}
	if s.Pods > 0 || err == nil {
		fmt.Println(s.Line())
	}
	return err
}

// newClient is the API client of the replay cluster behind kubeconfig.
func newClient(kubeconfig string, qps float32, burst int) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	cfg.UserAgent = "gpushare-replay"
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building client: %w", err)
	}
	return client, nil
}

func newChartCommand() *cobra.Command {
	var out, title string
	cmd := &cobra.Command{
		Use:   "chart --out chart.svg DIR...",
		Short: "Draw allocated % vs arrived % for result folders, one line per policy",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, dirs []string) error {
			if out == "" {
				return fmt.Errorf("--out is required")
			}
			series, err := replay.LoadSeries(dirs)
			if err != nil {
				return err
			}
			f, err := os.Create(out)
			if err != nil {
				return fmt.Errorf("creating chart: %w", err)
			}
			if err := replay.WriteSVG(f, title, series); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("writing chart: %w", err)
			}
			for _, s := range series {
				at := "n/a"
				if s.At100 != nil {
					at = fmt.Sprintf("%.2f%%", *s.At100)
				}
				fmt.Printf("%-12s runs=%d unallocated@100%%=%s\n", s.Label, s.Runs, at)
			}
			klog.InfoS("chart written", "path", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "SVG file to write")
	cmd.Flags().StringVar(&title, "title", "GPU allocation vs arrived workload", "chart title")
	return cmd
}

func newFamiliesCommand() *cobra.Command {
	var mode, policy, chart string
	cmd := &cobra.Command{
		Use:   "families DIR...",
		Short: "Print the trace-family table (one policy and mode, unallocated % at 100 % arrival, seeds averaged) next to FGD's published figures and the bound (bound.json below DIR, if any)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, dirs []string) error {
			ss, err := replay.CollectSummaries(dirs)
			if err != nil {
				return err
			}
			tab := replay.Aggregate(ss)
			bounds, err := replay.CollectBounds(dirs)
			if err != nil {
				return err
			}
			if mode == "" && len(ss) == 0 && len(bounds) > 0 {
				mode = "none" // bounds only: no policy's results to pick
			}
			if mode == "" {
				modes := tab.Modes()
				if len(modes) != 1 {
					return fmt.Errorf("results of several modes below %s (%s): pick one with --mode", strings.Join(dirs, ", "), strings.Join(modes, ", "))
				}
				mode = modes[0]
			}
			rows := replay.WithBounds(tab.FamilyRows(mode, policy), bounds)
			if replay.Summarize(rows).Families == 0 && len(bounds) == 0 {
				return fmt.Errorf("no %s results of policy %s for a trace family below %s", mode, policy, strings.Join(dirs, ", "))
			}
			label := fmt.Sprintf("%s (%s)", policy, mode)
			if len(ss) == 0 {
				label = "no policy's results"
			}
			if err := replay.WriteFamilies(os.Stdout, label, rows); err != nil {
				return err
			}
			if chart == "" {
				return nil
			}
			f, err := os.Create(chart)
			if err != nil {
				return fmt.Errorf("creating chart: %w", err)
			}
			if err := replay.WriteFamiliesSVG(f, fmt.Sprintf("Unallocated GPU %% at 100 %% arrival: %s (%s) vs FGD", policy, mode), rows); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		},
	}
	cmd.Flags().StringVar(&mode, "mode", "", "results of this mode, as the summaries record it (e.g. cluster-to100, cluster-plugin-to100, offline-random-cpu-extender-to100); empty: the only one there is")
	cmd.Flags().StringVar(&policy, "policy", "fgd", "results of this policy")
	cmd.Flags().StringVar(&chart, "chart", "", "also write a bar chart (SVG) to this file")
	return cmd
}

func newTableCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "table DIR...",
		Short: "Print a markdown table (policy × trace, unallocated % at 100 % arrival) of every summary.json below DIR",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, dirs []string) error {
			ss, err := replay.CollectSummaries(dirs)
			if err != nil {
				return err
			}
			if len(ss) == 0 {
				return fmt.Errorf("no summary.json below %s", strings.Join(dirs, ", "))
			}
			return replay.Aggregate(ss).WriteMarkdown(os.Stdout)
		},
	}
}

func newBoundCommand() *cobra.Command {
	var o replay.Options
	var bo bound.Options
	cmd := &cobra.Command{
		Use:   "bound --nodes N.csv --pods P.csv --seed S --out DIR",
		Short: "Write bound.json: a lower bound on the unallocated GPU % at 100 % arrival that any scheduler reaches with the same arrived pods",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.NodesPath == "" || o.PodsPath == "" || o.OutDir == "" {
				return fmt.Errorf("--nodes, --pods and --out are required")
			}
			o.Unit = replay.UnitMilli
			s, err := replay.RunBound(cmd.Context(), o, bo)
			if err != nil {
				return err
			}
			fmt.Println(s.Line())
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.NodesPath, "nodes", "", "node CSV (openb_node_list_gpu_node.csv)")
	fs.StringVar(&o.PodsPath, "pods", "", "pod CSV (openb_pod_list_*.csv)")
	fs.Int64Var(&o.Seed, "seed", 42, "shuffle and tuning seed, as the replay's")
	fs.Float64Var(&o.Tune, "tune", 1.3, "tuning, as the replay's")
	fs.StringVar(&o.OutDir, "out", "", "folder for bound.json")
	fs.IntVar(&bo.MaxPodClasses, "max-pod-classes", 0, "round pods' cpu and memory down until at most this many pod classes remain (0: the default, 160)")
	fs.IntVar(&bo.MaxRounds, "max-rounds", 0, "rounds of cuts (0: the default, 12)")
	return cmd
}
