// Command share-plugin is gpushare's kubelet device plugin. It advertises aliyun.com/gpu-mem
// units of every card, gives each container the card the scheduler extender chose, and
// publishes the node's per-card inventory. See docs/share-plugin.md.
package main

import (
	"context"
	"errors"
	goflag "flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/flagenv"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
	"github.com/gpushare/gpushare/pkg/nodecards"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
	"github.com/gpushare/gpushare/pkg/preflight"
	"github.com/gpushare/gpushare/pkg/version"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

// options are the command-line flags; each but --version also reads GPUSHARE_<FLAG> (see
// flagSet).
type options struct {
	nodeName       string
	kubeconfig     string
	simulate       string
	simulateFile   string
	faultsFile     string
	nvmlLibrary    string
	memoryUnit     string
	pluginDir      string
	memResource    string
	countResource  string
	metricsAddress string
	healthRecovery time.Duration
	nodeResync     time.Duration
	allocateWait   time.Duration
	podResources   string
	deviceList     string
	cdiKind        string
	cdiSpecDir     string
	mpsRoot        string
	nvidiaConfig   string
	limitHookPath  string
	limitHookFails string
	// The usage watchdog.
	usageInterval      time.Duration
	overGrantThreshold float64
	overGrantGrace     time.Duration
	overGrantAction    string
	mpsEscapeAction    string
	procRoot           string
	unclaimedExempt    []string
	simulateProcesses  string
	// The back end.
	backend         string
	draPluginDir    string
	draRegistrarDir string
	showVersion     bool
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.nodeName, "node-name", "", "name of this node (required; a DaemonSet sets its variable from spec.nodeName)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster config")
	fs.StringVar(&o.simulate, "simulate", "", "simulate GPUs instead of using NVML: comma list of <model>[:<count>], e.g. t4, a100-80gb:8, t4,a100-80gb (models: "+strings.Join(gpunvml.SimModels(), ", ")+")")
	fs.StringVar(&o.simulateFile, "simulate-file", "", "simulate the GPUs listed in this YAML file (list of model, memoryMiB, optional uuid)")
	fs.StringVar(&o.faultsFile, "simulate-faults-file", "", "with --simulate/--simulate-file: card indexes listed in this file get XID 79 every second")
	fs.StringVar(&o.nvmlLibrary, "nvml-library", "", "path of libnvidia-ml.so.1 (default: the dynamic loader's search path)")
	fs.StringVar(&o.memoryUnit, "memory-unit", "GiB", "size of one gpu-mem unit: GiB, MiB or a multiple such as 256MiB")
	fs.StringVar(&o.pluginDir, "device-plugin-dir", "/var/lib/kubelet/device-plugins", "kubelet's device plugin folder (holds kubelet.sock)")
	fs.StringVar(&o.memResource, "mem-resource", string(gpushare.DefaultMemResource), "extended resource advertised in memory units")
	fs.StringVar(&o.countResource, "count-resource", string(gpushare.DefaultCountResource), "extended resource set to the number of cards in node status")
	fs.StringVar(&o.metricsAddress, "metrics-address", ":9401", "address of /metrics and /healthz (with --backend=dra also /readyz); empty disables")
	fs.DurationVar(&o.healthRecovery, "health-recovery", 5*time.Minute, "a card is healthy again after this long without a critical XID")
	fs.DurationVar(&o.nodeResync, "node-resync", time.Minute, "how often the node's gpu-count and inventory annotation are re-checked")
	fs.DurationVar(&o.allocateWait, "allocate-wait", 5*time.Second, "how long Allocate waits for a just-bound pod to reach the informer")
	fs.StringVar(&o.deviceList, "device-list-strategy", string(deviceplugin.DeviceListEnvVar),
		"how Allocate hands the cards to the runtime: envvar (NVIDIA_VISIBLE_DEVICES=<UUIDs>; the runtime must trust that variable from unprivileged pods, so any pod can widen its cards: cooperative tenants only), "+
			"cdi-cri (CDI device names <cdi-kind>=<UUID> through the CRI, kubelet >= 1.28, a CDI-enabled runtime and the node's CDI spec) "+
			"or cdi-allocation (one CDI device "+nodecards.AllocationCDIKind+"=<pod UID>_<container> per container, from a spec share-plugin writes into --cdi-spec-dir with the cards' device nodes and the variables, which a pod's env cannot override; kubelet >= 1.28, a CDI-enabled runtime)")
	fs.StringVar(&o.cdiKind, "cdi-kind", nodecards.DefaultCDIKind, "with --device-list-strategy=cdi-cri or cdi-allocation, or --backend=dra: the CDI vendor/class of the card devices (<kind>=<UUID>; with cdi-allocation and --backend=dra, named where the runtime's CDI registry has them)")
	fs.StringVar(&o.cdiSpecDir, "cdi-spec-dir", nodecards.DefaultCDISpecDir, "the runtime's CDI spec folder, seen by share-plugin at the same path: with --device-list-strategy=cdi-allocation, where it writes the per-allocation specs; with cdi-cri or cdi-allocation and simulated GPUs, where it writes the simulated cards' spec and files (real GPUs with cdi-cri: generate the spec with nvidia-ctk cdi generate)")
	fs.StringVar(&o.mpsRoot, "mps-root", gpushare.DefaultMPSRoot,
		"host folder of the cards' MPS daemon folders (<mps-root>/<GPU UUID>/{pipe,log,shm,ready}, deploy/mps), mounted at the same path; used on nodes labelled "+gpushare.LabelIsolation+"="+string(gpushare.IsolationMPS))
	fs.StringVar(&o.nvidiaConfig, "nvidia-runtime-config", preflight.DefaultNVIDIAConfigPath,
		"the node's NVIDIA container runtime configuration (the host's file, mounted at the same path): whether it lets a pod's own NVIDIA_VISIBLE_DEVICES widen its cards goes to the node label "+gpushare.LabelEnvDeviceRequests+" (a missing file: unknown); empty: not read, no label")
	fs.StringVar(&o.limitHookPath, "limit-hook-path", deviceplugin.DefaultLimitHookPath,
		"host path of gpushare-limit-hook, which the per-allocation CDI spec names on nodes labelled "+gpushare.LabelIsolation+"="+string(gpushare.IsolationLimit)+" (the DaemonSet installs it there)")
	fs.StringVar(&o.limitHookFails, "limit-hook-failure-dir", limithook.DefaultFailureDir,
		"host folder, mounted at the same path, where gpushare-limit-hook leaves a record of each failure (its --failure-dir) and share-plugin counts them on /metrics (gpushare_limit_hook_failures_total) and removes them; empty: no records, no counter")
	fs.StringVar(&o.podResources, "pod-resources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "kubelet's PodResources API socket, which tells Allocate the pod being admitted; empty: pick the oldest matching pod")
	fs.DurationVar(&o.usageInterval, "usage-interval", 15*time.Second,
		"how often the usage watchdog lists each card's processes and compares each container's GPU memory with its grant; 0 disables the watchdog (needs hostPID)")
	fs.Float64Var(&o.overGrantThreshold, "over-grant-threshold", 0.05, "a container is over its grant when it uses more than grant × (1 + this fraction); 0..10")
	fs.DurationVar(&o.overGrantGrace, "over-grant-grace", time.Minute, "how long a container must stay over its grant before the event and the action")
	fs.StringVar(&o.overGrantAction, "over-grant-action", string(watchdog.OverGrantNone),
		"what follows the GPUMemoryOverGrant event: none, annotate (pod annotation "+gpushare.AnnotationOverGrant+") or evict (Eviction API; PodDisruptionBudgets apply; needs the pods/eviction RBAC rule)")
	fs.StringVar(&o.mpsEscapeAction, "mps-escape-action", string(watchdog.OverGrantEvict),
		"on nodes labelled "+gpushare.LabelIsolation+"="+string(gpushare.IsolationMPS)+": what follows the "+gpushare.EventGPUMPSEscape+" event about a pod's process that bypasses MPS: none, annotate (pod annotation "+gpushare.AnnotationMPSEscape+") or evict (Eviction API; needs the pods/eviction RBAC rule)")
	fs.StringSliceVar(&o.unclaimedExempt, "unclaimed-exempt-namespaces", []string{"kube-system"},
		"namespaces whose pods may use cards without gpu-mem (an MPS daemon, a GPU operator's monitoring): the watchdog reports no "+gpushare.EventGPUMemoryUnclaimed+" event about them")
	fs.StringVar(&o.procRoot, "proc-root", "/proc", "where the watchdog reads /proc/<pid>/cgroup of the processes NVML lists (the host's PID namespace)")
	fs.StringVar(&o.simulateProcesses, "simulate-processes-file", "", "with --simulate/--simulate-file: the simulated cards' processes, a YAML list of {card: <index or UUID>, pid, usedMiB}, read on every watchdog interval; without it the watchdog is off on a simulated node")
	fs.StringVar(&o.backend, "backend", string(gpushare.BackendDevicePlugin),
		"how the cards are offered: "+string(gpushare.BackendDevicePlugin)+" (aliyun.com/gpu-mem units through kubelet's device plugin API) or "+string(gpushare.BackendDRA)+
			" (ResourceSlices of driver "+gpushare.DRADriverName+", claims asking capacity.requests.memory; Kubernetes 1.36+, see docs/dra.md); the node's "+gpushare.LabelBackend+" label must name the same")
	fs.StringVar(&o.draPluginDir, "dra-plugin-dir", "", "with --backend=dra: the plugin's socket and checkpoint folder, the same path inside and outside the container (default /var/lib/kubelet/plugins/"+gpushare.DRADriverName+")")
	fs.StringVar(&o.draRegistrarDir, "dra-registrar-dir", "", "with --backend=dra: kubelet's plugin registration folder (default /var/lib/kubelet/plugins_registry)")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
}

// flagSet holds the options' flags, then klog's. Each of ours but --version reads
// GPUSHARE_<FLAG> (internal/flagenv), then, as in earlier releases, its bare name (NODE_NAME
// for --node-name); klog's read no environment variable.
func flagSet(o *options, h pflag.ErrorHandling) *pflag.FlagSet {
	fs := pflag.NewFlagSet("share-plugin", h)
	o.addFlags(fs)
	flagenv.Bind(fs, flagenv.Except("version"), flagenv.LegacyPrefix(""))
	kfs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(kfs)
	fs.AddGoFlagSet(kfs)
	return fs
}

func main() {
	var o options
	fs := flagSet(&o, pflag.ExitOnError)
	_ = fs.Parse(os.Args[1:]) // ExitOnError
	if err := flagenv.Apply(fs); err != nil {
		fmt.Fprintf(os.Stderr, "share-plugin: %v\n", err)
		os.Exit(2)
	}
	if o.showVersion {
		fmt.Println(version.Version)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "share-plugin failed")
		klog.Flush()
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	deviceList, err := deviceplugin.ParseDeviceListStrategy(o.deviceList)
	if err != nil {
		return fmt.Errorf("--device-list-strategy: %w", err)
	}
	unit, err := gpushare.ParseUnit(o.memoryUnit)
	if err != nil {
		return err
	}
	res := gpushare.Resources{Mem: corev1.ResourceName(o.memResource), Count: corev1.ResourceName(o.countResource)}
	if err := res.Validate(); err != nil {
		return err
	}
	if o.nodeName == "" {
		return errors.New("--node-name (or GPUSHARE_NODE_NAME) is required")
	}
	backend, err := gpushare.ParseBackend(o.backend)
	if err != nil {
		return fmt.Errorf("--backend: %w", err)
	}
	if d := o.limitHookFails; d != "" && (!filepath.IsAbs(d) || filepath.Clean(d) != d) {
		return fmt.Errorf("--limit-hook-failure-dir %q: want a clean absolute path", d)
	}
	action, err := watchdog.ParseOverGrantAction(o.overGrantAction)
	if err != nil {
		return fmt.Errorf("--over-grant-action: %w", err)
	}
	mpsEscape, err := watchdog.ParseMPSEscapeAction(o.mpsEscapeAction)
	if err != nil {
		return fmt.Errorf("--mps-escape-action: %w", err)
	}

	nv, simulated, err := openNVML(ctx, o)
	if err != nil {
		return err
	}
	usageInterval := o.usageInterval
	if simulated && o.simulateProcesses == "" && usageInterval > 0 {
		klog.InfoS("Usage watchdog off: simulated GPUs run no processes without --simulate-processes-file")
		usageInterval = 0
	}
	defer func() {
		if err := nv.Shutdown(); err != nil {
			klog.ErrorS(err, "NVML shutdown")
		}
	}()

	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = "share-plugin/" + version.Version
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating API client: %w", err)
	}
	events := record.NewBroadcaster(record.WithContext(ctx))
	defer events.Shutdown()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: deviceplugin.EventComponent, Host: o.nodeName})
	// Limits and MPS hold only where the runtime gives a container no card it was not
	// handed; read at each use, so fixing the runtime's configuration needs no restart.
	isolationBlocker := func() error { return preflight.IsolationBlocker(o.nvidiaConfig) }
	overGrant := watchdog.OverGrant{Threshold: o.overGrantThreshold, Grace: o.overGrantGrace, Action: action, MPSEscape: mpsEscape}
	if backend == gpushare.BackendDRA {
		var serve func(context.Context, http.Handler)
		if o.metricsAddress != "" {
			serve = func(ctx context.Context, h http.Handler) { serveMetrics(ctx, o.metricsAddress, h) }
		}
		usage := dra.UsageConfig{Interval: usageInterval, OverGrant: overGrant, UnclaimedExemptNamespaces: o.unclaimedExempt, ProcRoot: o.procRoot}
		if usageInterval > 0 {
			factory, pods := nodePodInformer(client, o.nodeName)
			usage.Pods = pods
			informersCtx, stopInformers := context.WithCancel(ctx)
			factory.Start(informersCtx.Done())
			defer factory.Shutdown()
			defer stopInformers()
		}
		return dra.Run(ctx, dra.RunConfig{
			NodeName: o.nodeName, Client: client, NVML: nv, Unit: unit, MemResource: res.Mem, CDISpecDir: o.cdiSpecDir, CDIKind: o.cdiKind, Simulated: simulated,
			PluginDataDir: o.draPluginDir, RegistrarDir: o.draRegistrarDir, HealthRecovery: o.healthRecovery,
			LimitHookPath: o.limitHookPath, LimitUnsupported: limitSupport(nv, simulated, o.nvmlLibrary), LimitHookFailureDir: o.limitHookFails, Serve: serve,
			IsolationBlocker: isolationBlocker,
			Recorder:         recorder, NodeResync: o.nodeResync, Usage: usage,
		})
	}
	if err := checkNodeBackend(ctx, client, o.nodeName); err != nil {
		return err
	}
	factory, pods := nodePodInformer(client, o.nodeName)
	var simulatedCardDir string // the per-allocation specs mount simulated cards' files
	if simulated && deviceList == deviceplugin.DeviceListCDIAllocation {
		simulatedCardDir = nodecards.SimulatedCardDir(o.cdiSpecDir)
	}

	limitUnsupported := limitSupport(nv, simulated, o.nvmlLibrary)
	klog.InfoS("Per-cgroup GPU memory limits (isolation "+string(gpushare.IsolationLimit)+")", "supported", limitUnsupported == nil, "why", limitUnsupported)

	plugin, err := deviceplugin.New(deviceplugin.Config{
		NodeName: o.nodeName, Resources: res, Unit: unit, PluginDir: o.pluginDir,
		NVML: nv, Client: client, Pods: pods,
		HealthRecovery: o.healthRecovery, NodeResync: o.nodeResync, AllocateWait: o.allocateWait,
		ReportUsedMemory: !simulated, PodResourcesSocket: o.podResources, Recorder: recorder,
		DeviceListStrategy: deviceList, CDIKind: o.cdiKind, CDISpecDir: o.cdiSpecDir, SimulatedCardDir: simulatedCardDir,
		MPSRoot: o.mpsRoot, LimitHookPath: o.limitHookPath, LimitHookFailureDir: o.limitHookFails, LimitUnsupported: limitUnsupported, UsageInterval: usageInterval,
		IsolationBlocker: isolationBlocker,
		ProcRoot:         o.procRoot, NVIDIARuntimeConfig: o.nvidiaConfig,
		OverGrant:                 overGrant,
		UnclaimedExemptNamespaces: o.unclaimedExempt,
	})
	if err != nil {
		return err
	}
	for _, c := range plugin.Cards() {
		klog.InfoS("GPU", "index", c.Index, "uuid", c.UUID, "model", c.Model, "memoryMiB", c.MemoryMiB, "units", c.Units, "unit", unit)
	}
	if simulated && deviceList != deviceplugin.DeviceListEnvVar {
		path, err := nodecards.WriteSimulatedCDISpec(o.cdiSpecDir, o.cdiKind, plugin.Cards())
		if err != nil {
			return fmt.Errorf("writing the simulated GPUs' CDI spec: %w", err)
		}
		klog.InfoS("Wrote the simulated GPUs' CDI spec", "path", path, "kind", o.cdiKind)
	}
	// Their own stop, ended on every return: Shutdown waits for the informers to stop, and
	// ctx is not done when Run returns an error (a refused unit change).
	informersCtx, stopInformers := context.WithCancel(ctx)
	factory.Start(informersCtx.Done())
	defer factory.Shutdown()
	defer stopInformers()
	if o.metricsAddress != "" {
		go serveMetrics(ctx, o.metricsAddress, plugin.Handler())
	}
	return plugin.Run(ctx)
}

// nodePodInformer is an informer of the node's pods only: it never holds the whole cluster.
// The caller starts the factory.
func nodePodInformer(client kubernetes.Interface, nodeName string) (informers.SharedInformerFactory, cache.SharedIndexInformer) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	return factory, factory.Core().V1().Pods().Informer()
}

// limitSupport says why the node's driver or cgroups cannot enforce per-cgroup memory limits
// (limithook.NVMLSupport), or nil: simulated cards always can (the hook records the limit).
func limitSupport(nv gpunvml.Interface, simulated bool, nvmlLibrary string) error {
	if simulated {
		return nil
	}
	devs, err := nv.Devices()
	if err != nil {
		return fmt.Errorf("listing GPUs: %w", err)
	}
	uuids := make([]string, len(devs))
	for i, d := range devs {
		uuids[i] = d.UUID
	}
	return limithook.SystemSupport(nvmlLibrary, limithook.DefaultCgroupRoot, uuids)
}

// checkNodeBackend refuses a node labelled for another back end than the device plugin.
func checkNodeBackend(ctx context.Context, client kubernetes.Interface, nodeName string) error {
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", nodeName, err)
	}
	return gpushare.CheckBackend(node.Labels, gpushare.BackendDevicePlugin)
}

// openNVML opens the real library, or the simulated node when --simulate or
// --simulate-file is set (then also watching the faults file). simulated reports the latter.
func openNVML(ctx context.Context, o options) (nv gpunvml.Interface, simulated bool, err error) {
	if o.simulate == "" && o.simulateFile == "" {
		if o.faultsFile != "" || o.simulateProcesses != "" {
			return nil, false, errors.New("--simulate-faults-file and --simulate-processes-file need --simulate or --simulate-file")
		}
		c, err := gpunvml.New(gpunvml.SystemLibrary(o.nvmlLibrary))
		if err != nil {
			return nil, false, err
		}
		return c, false, nil
	}
	if o.simulate != "" && o.simulateFile != "" {
		return nil, true, errors.New("use --simulate or --simulate-file, not both")
	}
	var cards []gpunvml.SimCard
	if o.simulate != "" {
		cards, err = gpunvml.ParseSimSpec(o.simulate)
	} else {
		cards, err = gpunvml.LoadSimFile(o.simulateFile)
	}
	if err != nil {
		return nil, true, err
	}
	sim, err := gpunvml.NewSimulator(o.nodeName, cards)
	if err != nil {
		return nil, true, err
	}
	if o.faultsFile != "" {
		go gpunvml.WatchFaultsFile(ctx, o.faultsFile, time.Second, sim)
	}
	sim.SetProcessesFile(o.simulateProcesses)
	c, err := gpunvml.New(sim.Library())
	if err != nil {
		return nil, true, err
	}
	return c, true, nil
}

func serveMetrics(ctx context.Context, addr string, h http.Handler) {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	klog.InfoS("Serving metrics", "address", addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.ErrorS(err, "Metrics server stopped")
	}
}
