package dra

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// RunConfig is what share-plugin --backend=dra hands the DRA back end.
type RunConfig struct {
	NodeName string
	Client   kubernetes.Interface
	NVML     gpunvml.Interface
	// Unit is the node's gpu-mem unit: the step of every claim's memory.
	Unit gpushare.Unit
	// MemResource is the device plugin's memory extended resource (share-plugin's
	// --mem-resource): pods that still request it on the node keep the plugin from starting.
	// Empty: gpushare.DefaultMemResource.
	MemResource corev1.ResourceName
	// CDISpecDir is the runtime's CDI spec folder, where the claims' specs go.
	CDISpecDir string
	// CDIKind is the kind of the runtime's own card devices (share-plugin's --cdi-kind):
	// the simulated cards' spec is written with it, and a card the runtime's CDI registry
	// holds a <kind>=<UUID> device for is handed over through it (Config.CDIKind).
	CDIKind string
	// Simulated: the cards are simulated, shown to containers as files that
	// nodecards.WriteSimulatedCDISpec writes into CDISpecDir.
	Simulated bool
	// PluginDataDir holds the plugin's socket and checkpoint; empty: kubelet's default,
	// /var/lib/kubelet/plugins/<driver>.
	PluginDataDir string
	// RegistrarDir is kubelet's plugin registration folder; empty: kubelet's default.
	RegistrarDir string
	// LimitHookPath is gpushare-limit-hook's path on the host; LimitUnsupported says why the
	// node cannot enforce gpushare.IsolationLimit (nil: it can).
	LimitHookPath    string
	LimitUnsupported error
	// IsolationBlocker says why the container runtime gives a container cards beyond its
	// claim's, outside any limit (preflight.IsolationBlocker; Config.IsolationBlocker); nil:
	// not checked.
	IsolationBlocker func() error
	// LimitHookFailureDir is where the hook leaves a record of each failure, counted on
	// Serve's /metrics as gpushare_limit_hook_failures_total; empty: no records, no counter.
	LimitHookFailureDir string
	// HealthRecovery is how long a card must go without a critical fault to be healthy again.
	HealthRecovery time.Duration
	// Clock drives health recovery; nil: the real clock.
	Clock clock.Clock
	// Recorder receives the Warning event of an isolation label the node cannot enforce;
	// nil: none is sent.
	Recorder record.EventRecorder
	// NodeResync is how often the node's isolation label is read again when no claim is
	// prepared; 0: only at start and at each prepare.
	NodeResync time.Duration
	// Serve serves the plugin's /metrics, /healthz and /readyz until its context is done;
	// nil: they are not served.
	Serve func(context.Context, http.Handler)
	// Usage is the usage watchdog; its metrics are served on Serve's /metrics.
	Usage UsageConfig
}

// Run serves the node's cards through DRA until ctx is done: it checks that the node is
// labelled for this back end and that none of its pods holds memory through the device
// plugin, registers the plugin with kubelet, and publishes the node's ResourceSlice again
// on every change of a card's health. Errors: a node not labelled gpushare.LabelBackend=dra,
// pods on the node that still hold memory through the device-plugin back end or that cannot
// be listed (checkDevicePluginPods), an API server older than Kubernetes 1.36 or without
// consumable capacity (checkAPIServer, checkCapacityKept), no cards, a checkpoint that
// cannot be read, or kubelet's plugin sockets that cannot be served.
func Run(ctx context.Context, rc RunConfig) error {
	node, err := rc.Client.CoreV1().Nodes().Get(ctx, rc.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", rc.NodeName, err)
	}
	if err := gpushare.CheckBackend(node.Labels, gpushare.BackendDRA); err != nil {
		return err
	}
	memResource := rc.MemResource
	if memResource == "" {
		memResource = gpushare.DefaultMemResource
	}
	if err := checkDevicePluginPods(ctx, rc.Client, rc.NodeName, memResource); err != nil {
		return err
	}
	if err := checkAPIServer(ctx, rc.Client.Discovery()); err != nil {
		return err
	}
	devs, err := rc.NVML.Devices()
	if err != nil {
		return fmt.Errorf("listing GPUs: %w", err)
	}
	cards, err := nodecards.BuildCards(devs, rc.Unit)
	if err != nil {
		return err
	}
	res, err := DriverResources(rc.NodeName, gpushare.Inventory{Unit: rc.Unit, Devices: cards}, nil)
	if err != nil {
		return err
	}
	if err := checkCapacityKept(ctx, rc.Client, rc.NodeName, res.Pools[rc.NodeName].Slices[0].Devices); err != nil {
		return err
	}
	cdiKind := rc.CDIKind
	if cdiKind == "" {
		cdiKind = nodecards.DefaultCDIKind
	}
	specs := nodecards.CardSpecs{Dir: rc.CDISpecDir, Minors: map[string]int{}}
	uuids := make([]string, 0, len(devs))
	for _, d := range devs {
		specs.Minors[d.UUID] = d.Minor
		uuids = append(uuids, d.UUID)
	}
	if rc.Simulated {
		if _, err := nodecards.WriteSimulatedCDISpec(rc.CDISpecDir, cdiKind, cards); err != nil {
			return fmt.Errorf("writing the simulated GPUs' files: %w", err)
		}
		specs.SimulatedCardDir = nodecards.SimulatedCardDir(rc.CDISpecDir)
	}
	dataDir := rc.PluginDataDir
	if dataDir == "" {
		dataDir = filepath.Join(kubeletplugin.KubeletPluginsDir, gpushare.DRADriverName)
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fmt.Errorf("creating the plugin's data folder: %w", err)
	}
	clk := rc.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	health := nodecards.NewHealth(clk, rc.HealthRecovery, cards)

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	label := isolationLabel{client: rc.Client, recorder: rc.Recorder, node: rc.NodeName, enforced: enforcedIsolation(rc.LimitUnsupported, rc.IsolationBlocker)}
	label.publish(ctx, node)
	probe := &probes{}
	fatal := func(err error) {
		probe.stopped.Store(true)
		cancel(err)
	}
	driver, err := New(Config{
		NodeName: rc.NodeName, Inventory: gpushare.Inventory{Unit: rc.Unit, Devices: cards},
		Specs: specs, CDIKind: cdiKind, DataDir: dataDir, Healthy: health.Healthy, Fatal: fatal,
		Isolation:     nodeIsolation(rc.Client, rc.NodeName, label.publish),
		LimitHookPath: rc.LimitHookPath, LimitUnsupported: rc.LimitUnsupported, IsolationBlocker: rc.IsolationBlocker,
		LimitHookFailureDir: rc.LimitHookFailureDir,
	})
	if err != nil {
		return err
	}
	usage, err := newUsageWatchdog(rc, cards, clk, driver)
	if err != nil {
		return fmt.Errorf("the usage watchdog: %w", err)
	}
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(gpushare.DRADriverName), kubeletplugin.KubeClient(rc.Client),
		kubeletplugin.NodeName(rc.NodeName), kubeletplugin.NodeUID(node.UID),
		kubeletplugin.PluginDataDirectoryPath(dataDir), kubeletplugin.HealthService(false),
	}
	if rc.RegistrarDir != "" {
		opts = append(opts, kubeletplugin.RegistrarDirectoryPath(rc.RegistrarDir))
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	m := newMetrics()
	if usage != nil {
		m.usage = usage.Collector()
	}
	if rc.LimitHookFailureDir != "" {
		m.limitHook = nodecards.NewLimitHookFailures(rc.LimitHookFailureDir, rc.NodeName)
	}
	helper, err := kubeletplugin.Start(ctx, observed{Driver: driver, m: m}, opts...)
	if err != nil {
		return fmt.Errorf("starting the kubelet DRA plugin: %w", err)
	}
	defer helper.Stop()
	defer cancel(nil) // before helper.Stop and wg.Wait
	// kubelet's NotifyRegistrationStatus call sets what RegistrationStatus returns.
	probe.registration = func() bool {
		s := helper.RegistrationStatus()
		return s != nil && s.PluginRegistered
	}
	if rc.Serve != nil {
		wg.Add(1)
		go func() { defer wg.Done(); rc.Serve(ctx, driver.handler(probe, m)) }()
	}
	if usage != nil {
		wg.Add(1)
		go func() { defer wg.Done(); runUsage(ctx, usage, rc.Usage.Pods) }()
	}

	faults := nodecards.NewFaultLog(uuids)
	raw, relayed := make(chan gpunvml.Fault, 16), make(chan gpunvml.Fault)
	wg.Add(4)
	go func() { defer wg.Done(); label.resync(ctx, clk, rc.NodeResync) }()
	go func() {
		defer wg.Done()
		if err := rc.NVML.WatchFaults(ctx, raw); err != nil {
			klog.ErrorS(err, "GPU health is not watched")
		}
	}()
	go func() { defer wg.Done(); faults.Relay(ctx, raw, relayed) }()
	go func() { defer wg.Done(); health.Run(ctx, relayed) }()
	return publish(ctx, helper, rc.NodeName, rc.Unit, cards, health, faults, probe)
}

// publish publishes the node's devices, again on every health change, until ctx is done.
// Returns nil when ctx ends on its own and the cause when Config.Fatal ended it.
func publish(ctx context.Context, helper *kubeletplugin.Helper, node string, unit gpushare.Unit, cards []gpushare.Device, health *nodecards.Health, faults *nodecards.FaultLog, probe *probes) error {
	for {
		changed := health.Changed() // before reading, so no change is missed
		res, err := DriverResources(node, nodecards.Inventory(cards, unit, health.Healthy), faults.Snapshot())
		if err != nil {
			return err
		}
		if err := helper.PublishResources(ctx, res); err != nil {
			return fmt.Errorf("publishing the node's ResourceSlice: %w", err)
		}
		probe.published.Store(true)
		select {
		case <-ctx.Done():
			if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
				return cause
			}
			return nil
		case <-changed:
		}
	}
}

// nodeIsolation reads the node's isolation label from the API at each call: a claim is
// prepared by the label as it is then, as the device plugin's Allocate does. Each node read
// goes to seen too.
func nodeIsolation(client kubernetes.Interface, name string, seen func(context.Context, *corev1.Node)) func(context.Context) (gpushare.Isolation, error) {
	return func(ctx context.Context) (gpushare.Isolation, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		seen(ctx, node)
		return gpushare.NodeIsolation(node.Labels)
	}
}
