// Command gpushare-scalebench is the driver of `make bench-scale` (hack/bench/scale.sh
// starts and stops the cluster processes between its steps). Each step writes its result
// as JSON into --out; `report` renders them as the table of docs/design/benchmarks.md.
//
//	gpushare-scalebench setup     --nodes 5000
//	gpushare-scalebench phase     --set plain --pods 2000
//	gpushare-scalebench phase     --set extender --pods 2000 --metrics-url URL --extender-pid PID
//	gpushare-scalebench phase     --set plugin --pods 2000 --scheduler-name gpushare-scheduler --scheduler-pid-file F
//	gpushare-scalebench dra-setup --nodes 5000
//	gpushare-scalebench phase     --set dra --pods 2000
//	gpushare-scalebench delete    --set plain
//	gpushare-scalebench burst     --burst-pods 100 --burst-units 6
//	gpushare-scalebench memory    --nodes 5000 --placed 40000 --metrics-url URL --extender-pid PID
//	gpushare-scalebench footprint --nodes 5000 --placed 40000 --metrics-url URL --extender-pid PID
//	gpushare-scalebench report
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/metrics"
	"github.com/gpushare/gpushare/internal/bench/scale"
	"github.com/gpushare/gpushare/internal/flagenv"
)

type options struct {
	kubeconfig   string
	namespace    string
	out          string
	nodes        int
	pods         int
	set          string
	workers      int
	qps          float32
	timeout      time.Duration
	metricsURL   string
	metricsTLS   metrics.TLSFiles
	extenderPID  int
	schedPIDFile string
	apiPIDFile   string
	schedName    string
	pluginPolicy string
	burstPods    int
	burstUnits   int64
	placed       int
	settle       time.Duration
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the bench cluster")
	fs.StringVar(&o.namespace, "namespace", scale.DefaultNamespace, "namespace of the bench pods")
	fs.StringVar(&o.out, "out", "_output/scale-results", "folder of the result JSON files")
	fs.IntVar(&o.nodes, "nodes", 5000, "number of nodes (8 cards × 16 units each)")
	fs.IntVar(&o.pods, "pods", 2000, "pods per scheduling phase")
	fs.StringVar(&o.set, "set", "", "pod set of phase/delete (plain, extender, plugin, burst, placed; dra and dra-plugin: pods with ResourceClaims)")
	fs.IntVar(&o.workers, "workers", 32, "concurrent create requests")
	fs.Float32Var(&o.qps, "kube-api-qps", 2000, "client QPS (burst is twice that)")
	fs.DurationVar(&o.timeout, "timeout", 20*time.Minute, "how long a step may wait for the cluster")
	fs.StringVar(&o.metricsURL, "metrics-url", "", "the extender's /metrics URL")
	fs.StringVar(&o.metricsTLS.CertFile, "extender-client-cert", "", "client certificate presented to the extender's diagnostics listener (mutual TLS)")
	fs.StringVar(&o.metricsTLS.KeyFile, "extender-client-key", "", "key of --extender-client-cert")
	fs.StringVar(&o.metricsTLS.CAFile, "extender-ca", "", "CA bundle that verifies the extender's serving certificate")
	fs.IntVar(&o.extenderPID, "extender-pid", 0, "the extender's process ID (RSS and CPU from /proc)")
	fs.StringVar(&o.schedPIDFile, "scheduler-pid-file", defaultPIDFile("kube-scheduler"), "file holding the scheduler's process ID (kube-scheduler, or gpushare-scheduler in the plugin phase; phase: its CPU time); empty: not measured")
	fs.StringVar(&o.apiPIDFile, "apiserver-pid-file", defaultPIDFile("kube-apiserver"), "file holding kube-apiserver's process ID (phase: its CPU time); empty: not measured")
	fs.StringVar(&o.schedName, "scheduler-name", "", "spec.schedulerName of the created pods (gpushare-scheduler for the plugin phase; empty: the default scheduler)")
	fs.StringVar(&o.pluginPolicy, "plugin-policy", "binpack", "report: the GPUShare policy of the plugin phase (fgd is judged against a lower target)")
	fs.IntVar(&o.burstPods, "burst-pods", 100, "burst: pods created at once on one node")
	fs.Int64Var(&o.burstUnits, "burst-units", 6, "burst: gpu-mem units per pod")
	fs.IntVar(&o.placed, "placed", 40000, "memory: pods created already bound")
	fs.DurationVar(&o.settle, "settle", 20*time.Second, "burst/memory: wait before the final reading")
}

func main() {
	var o options
	fs := pflag.NewFlagSet("gpushare-scalebench", pflag.ExitOnError)
	o.addFlags(fs)
	flagenv.Bind(fs) // before klog's flags, which keep their own rules
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	if err := flagenv.Apply(fs); err != nil {
		fmt.Fprintln(os.Stderr, "gpushare-scalebench:", err)
		os.Exit(2)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gpushare-scalebench [flags] setup|dra-setup|phase|delete|burst|memory|footprint|report")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, fs.Arg(0), &o); err != nil {
		klog.ErrorS(err, "scalebench failed", "step", fs.Arg(0))
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// defaultPIDFile is where hack/lib's start_proc records process name's PID in the state
// dir hack/bench/scale.sh exports.
func defaultPIDFile(name string) string {
	if dir := os.Getenv("GPUSHARE_STATE_DIR"); dir != "" {
		return filepath.Join(dir, "pids", name)
	}
	return ""
}

// schedulerPID reads --scheduler-pid-file; 0 when unset or unreadable (CPU not measured).
func (o *options) schedulerPID() int { return readPIDFile("scheduler", o.schedPIDFile) }

// readPIDFile reads the process ID of who from file; 0 when unset or unreadable (its CPU
// is then not measured).
func readPIDFile(who, file string) int {
	if file == "" {
		return 0
	}
	b, err := os.ReadFile(file)
	if err != nil {
		klog.InfoS("CPU not measured", "process", who, "err", err)
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		klog.InfoS("CPU not measured", "process", who, "file", file, "err", err)
		return 0
	}
	return pid
}

func (o *options) bench() (*scale.Bench, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %q: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = o.qps, int(2*o.qps)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the kubernetes client: %w", err)
	}
	objs := scale.DefaultObjects()
	objs.Namespace = o.namespace
	objs.SchedulerName = o.schedName
	// The DRA sets' pods ask for their memory through ResourceClaims, made before the
	// timing starts.
	objs.DRA = o.set == scale.SetDRA || o.set == scale.SetDRAPlugin
	return &scale.Bench{Client: client, Objects: objs, Workers: o.workers, APIServerPID: readPIDFile("kube-apiserver", o.apiPIDFile)}, nil
}
