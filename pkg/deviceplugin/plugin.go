package deviceplugin

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/internal/broadcast"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
	"github.com/gpushare/gpushare/pkg/noderuntime"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

// Plugin is the device plugin of one node.
type Plugin struct {
	// Embedded so that methods added to the API in later kubelet versions answer
	// Unimplemented instead of breaking the build.
	pluginapi.UnimplementedDevicePluginServer

	cfg   Config
	node  *noderuntime.Node
	cards nodecards.Set
	// health is the node's (node.Health).
	health *nodecards.Health
	// pods is the node's pod informer (node.Pods).
	pods cache.SharedIndexInformer
	// registrations is notified after each successful registration with kubelet.
	registrations *broadcast.Signal

	policy policy.Policy // places pods without a valid allocation
	// ambiguous counts Allocates that kubelet's PodResources did not settle, by reason.
	ambiguous *prometheus.CounterVec

	mu sync.Mutex // serialises Allocate and GetPreferredAllocation; guards listFailing
	// listFailing is true while PodResources calls fail (the failure is logged once).
	listFailing bool

	// ledger holds what this process granted the node's pods; it has its own lock, so
	// /served, metrics and the watchdog read it without waiting for an Allocate.
	ledger *ledger

	regMu sync.Mutex
	isReg bool

	usage *watchdog.Watchdog // runs when the node's Usage.Interval > 0

	preflight *runtimePreflight // the node's NVIDIA runtime configuration, when NVIDIARuntimeConfig is set

	// runtimeDevicesSeen is what the last cdi-allocation answer found in the runtime's CDI
	// registry (runtimeDevicesFound or runtimeDevicesMissing), so that logRuntimeDevices
	// logs a change once.
	runtimeDevicesSeen atomic.Int32

	// streams counts the ListAndWatch streams whose first device list reached gRPC: kubelet
	// marks the cards' devices healthy only once it has read one, so a registration alone
	// does not mean pods can be admitted.
	streams atomic.Int32
}

// New is the device plugin of node: it checks that the node's fake devices fit in one
// ListAndWatch message and, on a simulated node handing the cards through CDI, writes the
// simulated cards' CDI spec. It starts nothing; call Run. Errors: no node, an invalid
// Config, too many fake devices for the unit, a simulated cards' spec that cannot be
// written, or the node's pod informer refusing the ledger's handler.
func New(cfg Config, node *noderuntime.Node) (*Plugin, error) {
	if node == nil {
		return nil, errors.New("the device plugin needs the node")
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("device plugin config: %w", err)
	}
	cards := node.Cards()
	if err := checkMessageSize(cards, node.Unit()); err != nil {
		return nil, err
	}
	pol, err := policy.New(placementPolicy)
	if err != nil {
		return nil, err
	}
	if node.Simulated() && cfg.DeviceListStrategy == DeviceListCDIAllocation && cfg.SimulatedCardDir == "" {
		cfg.SimulatedCardDir = nodecards.SimulatedCardDir(cfg.CDISpecDir) // the per-allocation specs mount simulated cards' files
		if err := cfg.checkToolkitHook(); err != nil {
			return nil, fmt.Errorf("device plugin config: %w", err)
		}
	}
	p := &Plugin{
		cfg:           cfg,
		node:          node,
		cards:         nodecards.NewSet(cards),
		health:        node.Health(),
		pods:          node.Pods(),
		registrations: broadcast.New(),
		policy:        pol,
		ambiguous: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_plugin_allocate_ambiguous_total",
			Help: "Allocate calls whose pod kubelet's PodResources API did not single out, served to the oldest matching pod, by reason (several, none, unavailable).",
		}, []string{"reason"}),
	}
	p.preflight = newRuntimePreflight(node.Name())
	p.ledger = newLedger(node.Name(), node.Clock(), p.removeAllocationSpecs)
	p.usage = node.NewWatchdog(usageLedger{p}, p.nodeResync())
	// The informer's events keep the ledger current between Allocate calls: a pod deleted
	// soon after it was served (a Deployment scaled down, a namespace removed) frees its
	// cards at once, even when no Allocate ran while the pod view showed it.
	if _, err := p.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.ledger.podSeen,
		UpdateFunc: func(_, obj any) { p.ledger.podSeen(obj) },
		DeleteFunc: p.ledger.podGone,
	}); err != nil {
		return nil, fmt.Errorf("watching the node's pods: %w", err)
	}
	if err := p.logAndWriteCards(); err != nil {
		return nil, err
	}
	return p, nil
}

// logAndWriteCards logs the node's limit support and cards and, on a simulated node whose
// strategy hands cards through CDI, writes the simulated cards' CDI spec.
func (p *Plugin) logAndWriteCards() error {
	why := p.node.LimitUnsupported()
	klog.InfoS("Per-cgroup GPU memory limits (isolation "+string(gpushare.IsolationLimit)+")", "supported", why == nil, "why", why)
	unit := p.node.Unit()
	for _, c := range p.Cards() {
		klog.InfoS("GPU", "index", c.Index, "uuid", c.UUID, "model", c.Model, "memoryMiB", c.MemoryMiB, "units", c.Units, "unit", unit)
	}
	if !p.node.Simulated() || p.cfg.DeviceListStrategy == DeviceListEnvVar {
		return nil
	}
	path, err := nodecards.WriteSimulatedCDISpec(p.cfg.CDISpecDir, p.cfg.CDIKind, p.Cards())
	if err != nil {
		return fmt.Errorf("writing the simulated GPUs' CDI spec: %w", err)
	}
	klog.InfoS("Wrote the simulated GPUs' CDI spec", "path", path, "kind", p.cfg.CDIKind)
	return nil
}

// nodeResync is how often node facts are re-checked: the node's NodeResync, 1m when unset
// (kubelet may zero gpu-count).
func (p *Plugin) nodeResync() time.Duration {
	if r := p.node.NodeResync(); r > 0 {
		return r
	}
	return time.Minute
}

// Cards returns the cards the plugin advertises, in index order, with their health now.
func (p *Plugin) Cards() []gpushare.Device {
	return p.node.Inventory().Devices
}
