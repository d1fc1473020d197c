package deviceplugin

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/internal/broadcast"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

// Plugin is the device plugin of one node.
type Plugin struct {
	// Embedded so that methods added to the API in later kubelet versions answer
	// Unimplemented instead of breaking the build.
	pluginapi.UnimplementedDevicePluginServer

	cfg   Config
	cards nodecards.Set
	// minors is each card's device-node minor number by UUID (-1: unknown), for the
	// per-allocation CDI specs.
	minors map[string]int
	health *nodecards.Health
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

	usage *watchdog.Watchdog // runs when UsageInterval > 0

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

// New discovers the cards through NVML and checks that their fake devices fit in one
// ListAndWatch message. It starts nothing; call Run.
func New(cfg Config) (*Plugin, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("device plugin config: %w", err)
	}
	devs, err := cfg.NVML.Devices()
	if err != nil {
		return nil, fmt.Errorf("listing GPUs: %w", err)
	}
	cards, err := nodecards.BuildCards(devs, cfg.Unit)
	if err != nil {
		return nil, err
	}
	if err := checkMessageSize(cards, cfg.Unit); err != nil {
		return nil, err
	}
	pol, err := policy.New(placementPolicy)
	if err != nil {
		return nil, err
	}
	minors := make(map[string]int, len(devs))
	for _, d := range devs {
		minors[d.UUID] = d.Minor
	}
	p := &Plugin{
		cfg:           cfg,
		cards:         nodecards.NewSet(cards),
		minors:        minors,
		health:        nodecards.NewHealth(cfg.Clock, cfg.HealthRecovery, cards),
		registrations: broadcast.New(),
		policy:        pol,
		ambiguous: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_plugin_allocate_ambiguous_total",
			Help: "Allocate calls whose pod kubelet's PodResources API did not single out, served to the oldest matching pod, by reason (several, none, unavailable).",
		}, []string{"reason"}),
	}
	p.preflight = newRuntimePreflight(cfg.NodeName)
	p.ledger = newLedger(cfg.NodeName, cfg.Clock, p.removeAllocationSpecs)
	p.usage = watchdog.New(watchdog.Config{
		NodeName: cfg.NodeName, Cards: cards, Unit: cfg.Unit, Processes: cfg.NVML.Processes,
		Client: cfg.Client, Recorder: cfg.Recorder, Clock: cfg.Clock,
		Interval: cfg.UsageInterval, Resync: cfg.NodeResync, OverGrant: cfg.OverGrant, ProcRoot: cfg.ProcRoot,
		Unclaimed: watchdog.Unclaimed{ExemptNamespaces: cfg.UnclaimedExemptNamespaces},
	}, claims{p})
	// The informer's events keep the ledger current between Allocate calls: a pod deleted
	// soon after it was served (a Deployment scaled down, a namespace removed) frees its
	// cards at once, even when no Allocate ran while the pod view showed it.
	if _, err := cfg.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.ledger.podSeen,
		UpdateFunc: func(_, obj any) { p.ledger.podSeen(obj) },
		DeleteFunc: p.ledger.podGone,
	}); err != nil {
		return nil, fmt.Errorf("watching the node's pods: %w", err)
	}
	return p, nil
}

// Cards returns the cards the plugin advertises, in index order, with their health now.
func (p *Plugin) Cards() []gpushare.Device {
	return nodecards.Inventory(p.cards.List(), p.cfg.Unit, p.health.Healthy).Devices
}
