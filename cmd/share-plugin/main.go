// Command share-plugin is gpushare's node agent: it opens the node (pkg/noderuntime) and
// serves it with one back end, the kubelet device plugin (pkg/deviceplugin: aliyun.com/gpu-mem
// units of every card, each container the card the scheduler extender chose, the node's
// per-card inventory) or, with --backend=dra, the kubelet DRA plugin (pkg/dra). main.go
// holds the flags, run.go the start-up steps. See docs/share-plugin.md and docs/dra.md.
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/flagenv"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
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
	mpsReady       time.Duration
	mpsGrace       time.Duration
	mpsOverhead    int64
	nvidiaConfig   string
	limitHookPath  string
	limitHookFails string
	// nvidiaCDIHook and nvidiaDriverRoot hand the limits to NVIDIA's toolkit hook.
	nvidiaCDIHook, nvidiaDriverRoot string
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
	fs.StringVar(&o.metricsAddress, "metrics-address", ":9401", "address of /metrics, /healthz and /readyz; empty disables")
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
		"host folder of the MPS daemons' folders (<mps-root>/<GPU UUID>/<cap>/, run by gpushare-mps, deploy/mps), mounted writable at the same path; used on nodes labelled "+gpushare.LabelIsolation+"="+string(gpushare.IsolationMPS))
	fs.DurationVar(&o.mpsReady, "mps-ready-timeout", 30*time.Second,
		"on nodes labelled "+gpushare.LabelIsolation+"="+string(gpushare.IsolationMPS)+": how long Allocate waits for the MPS daemon of a container's grant before it refuses the container")
	fs.Int64Var(&o.mpsOverhead, "mps-daemon-overhead-mib", 0,
		"on nodes labelled "+gpushare.LabelIsolation+"="+string(gpushare.IsolationMPS)+": GPU memory in MiB one MPS daemon's server takes on its card outside every grant (see gpushare_card_mps_server_memory_used_bytes); Allocate refuses a container whose grant needs a new daemon on a card without room for it; 0: not counted")
	fs.DurationVar(&o.mpsGrace, "mps-release-grace", 2*time.Minute,
		"how long an MPS daemon no running pod holds is kept after the last Allocate that asked for it, before share-plugin releases it (gpushare-mps then stops it)")
	fs.StringVar(&o.nvidiaConfig, "nvidia-runtime-config", preflight.DefaultNVIDIAConfigPath,
		"the node's NVIDIA container runtime configuration (the host's file, mounted at the same path): whether it lets a pod's own NVIDIA_VISIBLE_DEVICES widen its cards goes to the node label "+gpushare.LabelEnvDeviceRequests+" (a missing file: unknown); empty: not read, no label")
	fs.StringVar(&o.limitHookPath, "limit-hook-path", deviceplugin.DefaultLimitHookPath,
		"host path of gpushare-limit-hook, which the per-allocation CDI spec names on nodes labelled "+gpushare.LabelIsolation+"="+string(gpushare.IsolationLimit)+" (the DaemonSet installs it there)")
	fs.StringVar(&o.nvidiaCDIHook, "nvidia-cdi-hook-path", "",
		"host path of NVIDIA's container toolkit hook nvidia-cdi-hook; when set, the per-allocation CDI spec on nodes labelled "+gpushare.LabelIsolation+"="+string(gpushare.IsolationLimit)+
			" hands the limits to its "+gpushare.ToolkitApplyLimitsHook+" (variables "+gpushare.EnvToolkitMemRequest+" and "+gpushare.EnvToolkitMemLimit+") instead of gpushare-limit-hook, which then sets no pod-level limit; device plugin back end, real cards only; empty: gpushare-limit-hook")
	fs.StringVar(&o.nvidiaDriverRoot, "nvidia-driver-root", "",
		"with --nvidia-cdi-hook-path: the NVIDIA driver's root on the host, the hook's --driver-root (empty: /; /run/nvidia/driver under NVIDIA's GPU Operator)")
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
