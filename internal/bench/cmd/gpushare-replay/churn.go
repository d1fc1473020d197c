package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpushare/gpushare/internal/bench/replay"
)

// newChurnCommand is "gpushare-replay churn": the offline replay with departures.
func newChurnCommand() *cobra.Command {
	var o replay.ChurnOptions
	var co replay.ChurnClusterOptions
	var unit, kubeconfig string
	cmd := &cobra.Command{
		Use:   "churn --nodes N.csv --pods P.csv --policy fgd --out DIR",
		Short: "Replay the trace with departures: pods arrive at creation_time, leave after their run time; offline (a FIFO queue when nothing fits) or, with --kubeconfig, through a cluster's scheduler",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.NodesPath == "" || o.PodsPath == "" || o.OutDir == "" {
				return fmt.Errorf("--nodes, --pods and --out are required")
			}
			o.Unit = replay.UnitMode(unit)
			if o.Label == "" {
				o.Label = o.Policy
				switch o.DRA {
				case replay.DRAAlone:
					o.Label = "kube-scheduler-dra"
				case replay.DRAGPUShare:
					o.Label = o.Policy + "-dra"
				}
			}
			var s replay.ChurnSummary
			var err error
			if kubeconfig != "" {
				client, cerr := newClient(kubeconfig, 1000, 2000)
				if cerr != nil {
					return cerr
				}
				s, err = replay.RunChurnCluster(cmd.Context(), client, o, co)
			} else {
				s, err = replay.RunChurn(cmd.Context(), o)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stdout, "scheduler=%s trace=%s pods=%d placed=%d never=%d allocated_mean=%.2f%% free_while_waiting=%.2f%% waiting_time=%.1f%% pending_p50=%.0fs p99=%.0fs offered=%.1f%% wall=%.1fs\n",
				s.Scheduler, s.Trace, s.Pods, s.Placed, s.NeverPlaced, s.AllocatedMeanPct, s.FreeWhileWaitingPct, s.WaitingTimePct, s.PendingP50, s.PendingP99, s.OfferedLoadPct, s.WallSeconds)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.NodesPath, "nodes", "", "node CSV (openb_node_list_gpu_node.csv)")
	fs.StringVar(&o.PodsPath, "pods", "", "pod CSV (openb_pod_list_*.csv)")
	fs.StringVar(&o.TimesPath, "times", "", "CSV with the pods' creation_time and deletion_time by name (default: --pods; the multigpu traces have none: give openb_pod_list_default.csv)")
	fs.Float64Var(&o.Timing.ArrivalFactor, "arrival-factor", replay.ChurnArrivalFactor, "divide the gaps between arrivals by this")
	fs.Float64Var(&o.Timing.DurationFactor, "duration-factor", replay.ChurnDurationFactor, "divide the pods' run times (deletion_time − creation_time) by this; arrival-factor/duration-factor multiplies the offered load")
	fs.Int64Var(&o.Seed, "seed", 42, "seed of random ties and of the times borrowed by pods --times lacks")
	fs.Float64Var(&o.Tune, "tune", 1.3, "append clones (each with its original's times) until the GPU request reaches this multiple of capacity (0: the trace as is)")
	fs.StringVar(&unit, "unit", string(replay.UnitMilli), "gpu-mem unit: milli or gib")
	fs.IntVar(&o.Limit, "limit", 0, "replay only the first N pods in arrival order (0: all)")
	fs.StringVar(&o.Policy, "policy", "", "policy (binpack, fgd, ...); with --offline-dra gpushare the GPUShare plugin's")
	fs.StringVar(&o.DRA, "offline-dra", "", "alone: kube-scheduler's DRA allocator (no --policy); gpushare: DRA with the GPUShare plugin scoring; empty: the device-plugin path")
	fs.StringVar(&o.Ties, "offline-ties", replay.TiesRandom, "node choice: random (the cluster path) or first")
	fs.StringVar(&o.CPUPods, "offline-cpu-pods", replay.CPUExtender, "CPU-only pods with random ties: first-fit, random, ranked or extender")
	fs.StringVar(&o.Label, "label", "", "the scheduler's name in the results (default: the policy, kube-scheduler-dra, <policy>-dra)")
	fs.StringVar(&o.OutDir, "out", "", "result folder (churn.json, churn-series.csv, churn-stream.csv)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "replay through the scheduler of this cluster (kwok nodes), not offline; --policy and --label then only name the results")
	fs.StringVar(&co.Namespace, "namespace", "replay", "with --kubeconfig: namespace of the replay pods")
	fs.StringVar(&co.SchedulerName, "scheduler-name", "", "with --kubeconfig: spec.schedulerName of the replay pods (empty: the default scheduler)")
	fs.DurationVar(&co.Drain, "drain", 2*time.Minute, "with --kubeconfig: how long the replay goes on after the last arrival; pods still waiting then count as never placed")
	return cmd
}
