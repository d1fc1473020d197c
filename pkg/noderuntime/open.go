package noderuntime

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
	"github.com/gpushare/gpushare/pkg/preflight"
)

// EventComponent is the source component of share-plugin's events.
const EventComponent = "gpushare-share-plugin"

// Options are share-plugin's flags that shape the node, whichever back end serves it.
type Options struct {
	NodeName string
	// Kubeconfig is the kubeconfig file; empty: in-cluster config.
	Kubeconfig string
	// UserAgent is the API client's user agent.
	UserAgent string
	NVML      NVMLOptions
	Unit      gpushare.Unit
	// HealthRecovery and NodeResync are Config's.
	HealthRecovery time.Duration
	NodeResync     time.Duration
	// NVIDIARuntimeConfig is the node's NVIDIA container runtime configuration, read at
	// each use by the isolation blocker (preflight.IsolationBlocker: "" blocks).
	NVIDIARuntimeConfig string
	Usage               Usage
}

// NVMLOptions choose the node's NVML: the driver's library, or the simulator when Simulate
// or SimulateFile is set.
type NVMLOptions struct {
	// Library is the path of libnvidia-ml.so.1; empty: the dynamic loader's search path.
	Library string
	// Simulate is a --simulate spec (gpunvml.ParseSimSpec); SimulateFile a YAML file of
	// cards (gpunvml.LoadSimFile).
	Simulate     string
	SimulateFile string
	// FaultsFile lists the simulated cards that get XID 79 every second.
	FaultsFile string
	// SimulateProcesses is the simulated cards' processes file, read at each watchdog
	// interval.
	SimulateProcesses string
}

// Open builds the node share-plugin serves: it opens NVML (OpenNVML), the API client and
// the event recorder, reads the node's limit support (LimitSupport) and discovers its
// cards (New). shutdown shuts the recorder, then NVML, down; call it when the back end has
// returned. On a simulated node without a processes file the watchdog is off. Errors:
// those of OpenNVML, of the kubeconfig and the client, and of New.
func Open(ctx context.Context, o Options) (n *Node, shutdown func(), err error) {
	nv, simulated, err := OpenNVML(ctx, o.NodeName, o.NVML)
	if err != nil {
		return nil, nil, err
	}
	closers := []func(){func() {
		if err := nv.Shutdown(); err != nil {
			klog.ErrorS(err, "NVML shutdown")
		}
	}}
	shutdown = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			shutdown()
		}
	}()
	usage := o.Usage
	if simulated && o.NVML.SimulateProcesses == "" && usage.Interval > 0 {
		klog.InfoS("Usage watchdog off: simulated GPUs run no processes without --simulate-processes-file")
		usage.Interval = 0
	}
	client, recorder, stopEvents, err := openAPI(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, stopEvents)
	n, err = New(Config{
		Name: o.NodeName, Client: client, Recorder: recorder, NVML: nv, Simulated: simulated, Unit: o.Unit,
		HealthRecovery: o.HealthRecovery, NodeResync: o.NodeResync,
		LimitUnsupported: LimitSupport(nv, simulated, o.NVML.Library),
		// Limits and MPS hold only where the runtime gives a container no card it was not
		// handed; read at each use, so fixing the runtime's configuration needs no restart.
		IsolationBlocker: func() error { return preflight.IsolationBlocker(o.NVIDIARuntimeConfig) },
		Usage:            usage,
	})
	if err != nil {
		return nil, nil, err
	}
	return n, shutdown, nil
}

// openAPI builds the API client and the event recorder of node events (EventComponent);
// stop shuts the recorder down. Errors: a kubeconfig that cannot be loaded, a client that
// cannot be built.
func openAPI(ctx context.Context, o Options) (kubernetes.Interface, record.EventRecorder, func(), error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = o.UserAgent
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("creating API client: %w", err)
	}
	events := record.NewBroadcaster(record.WithContext(ctx))
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent, Host: o.NodeName})
	return client, recorder, events.Shutdown, nil
}

// OpenNVML opens the driver's library, or the simulated node when Simulate or SimulateFile
// is set (then also watching the faults file until ctx is done). simulated reports the
// latter. Errors: the simulator's files without a simulated node, both simulated sources,
// an invalid spec or file, a library that cannot be loaded.
func OpenNVML(ctx context.Context, nodeName string, o NVMLOptions) (nv gpunvml.Interface, simulated bool, err error) {
	if o.Simulate == "" && o.SimulateFile == "" {
		if o.FaultsFile != "" || o.SimulateProcesses != "" {
			return nil, false, errors.New("--simulate-faults-file and --simulate-processes-file need --simulate or --simulate-file")
		}
		c, err := gpunvml.New(gpunvml.SystemLibrary(o.Library))
		if err != nil {
			return nil, false, err
		}
		return c, false, nil
	}
	if o.Simulate != "" && o.SimulateFile != "" {
		return nil, true, errors.New("use --simulate or --simulate-file, not both")
	}
	var cards []gpunvml.SimCard
	if o.Simulate != "" {
		cards, err = gpunvml.ParseSimSpec(o.Simulate)
	} else {
		cards, err = gpunvml.LoadSimFile(o.SimulateFile)
	}
	if err != nil {
		return nil, true, err
	}
	sim, err := gpunvml.NewSimulator(nodeName, cards)
	if err != nil {
		return nil, true, err
	}
	if o.FaultsFile != "" {
		go gpunvml.WatchFaultsFile(ctx, o.FaultsFile, time.Second, sim)
	}
	sim.SetProcessesFile(o.SimulateProcesses)
	c, err := gpunvml.New(sim.Library())
	if err != nil {
		return nil, true, err
	}
	return c, true, nil
}

// LimitSupport says why the node's driver or cgroups cannot enforce per-cgroup memory
// limits (limithook.SystemSupport), or nil: simulated cards always can (the hook records
// the limit).
func LimitSupport(nv gpunvml.Interface, simulated bool, nvmlLibrary string) error {
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
