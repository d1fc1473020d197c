package noderuntime

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

// DefaultHealthRecovery is how long a card must go without a critical fault to be healthy
// again when Config.HealthRecovery is not set (share-plugin's --health-recovery default).
const DefaultHealthRecovery = 5 * time.Minute

// Config is what New needs.
type Config struct {
	// Name is the node's name (share-plugin's --node-name).
	Name   string
	Client kubernetes.Interface
	// Recorder receives the events on the node and its pods; nil: none are sent.
	Recorder record.EventRecorder
	NVML     gpunvml.Interface
	// Simulated: NVML is pkg/nvml's simulator, whose cards containers see as the files
	// nodecards.WriteSimulatedCDISpec writes.
	Simulated bool
	// Unit is the node's gpu-mem unit: each card counts floor(MiB / Unit.MiB) units.
	Unit gpushare.Unit
	// Clock drives health recovery, node resync and the watchdog; nil: the real clock.
	Clock clock.WithTicker
	// HealthRecovery is how long a card must go without a critical fault to be healthy
	// again; 0: DefaultHealthRecovery.
	HealthRecovery time.Duration
	// NodeResync is how often the back ends read the node again (--node-resync); kept as
	// given: each back end says what 0 means for it.
	NodeResync time.Duration
	// Pods is an informer over the node's pods only (field selector spec.nodeName=Name),
	// started by its owner; nil: New makes one, which StartPods starts.
	Pods cache.SharedIndexInformer
	// LimitUnsupported says why the node's driver or cgroups cannot enforce per-cgroup
	// memory limits (LimitSupport); nil: they can.
	LimitUnsupported error
	// IsolationBlocker says why the node's container runtime gives a container cards
	// beyond those it was handed, outside any limit or MPS daemon
	// (preflight.IsolationBlocker); called at each use, so a fixed runtime configuration
	// counts without a restart. nil: not checked.
	IsolationBlocker func() error
	// Usage is the usage watchdog's settings.
	Usage Usage
}

// Usage is the usage watchdog's settings (pkg/watchdog), as share-plugin's
// --usage-interval, --over-grant-*, --unclaimed-exempt-namespaces and --proc-root set them.
type Usage struct {
	// Interval is how often the watchdog lists the cards' processes; 0: no watchdog.
	Interval time.Duration
	// OverGrant is the watchdog's threshold, grace and action.
	OverGrant watchdog.OverGrant
	// UnclaimedExemptNamespaces hold pods that may use cards without holding memory on
	// them (watchdog.Unclaimed).
	UnclaimedExemptNamespaces []string
	// ProcRoot is where the watchdog reads /proc/<pid>/cgroup (default /proc).
	ProcRoot string
}

// Node is the node both back ends serve: its cards, their health, its API objects and
// what it can enforce. New builds it; the back end runs WatchHealth and StartPods.
type Node struct {
	cfg     Config
	cards   []gpushare.Device
	minors  map[string]int // UUID → device-node minor (-1: unknown)
	health  *nodecards.Health
	faults  *nodecards.FaultLog
	factory informers.SharedInformerFactory // nil when Config.Pods was given
}

// New discovers the node's cards through NVML (nodecards.BuildCards: index order, each
// card's units of Unit) and tracks their health, all healthy at first. It starts nothing.
// Errors: a missing name, unit, NVML or client, a negative usage interval or an invalid
// over-grant setting, NVML failing to list the cards, or cards nodecards.BuildCards
// refuses.
func New(cfg Config) (*Node, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("node runtime config: %w", err)
	}
	devs, err := cfg.NVML.Devices()
	if err != nil {
		return nil, fmt.Errorf("listing GPUs: %w", err)
	}
	cards, err := nodecards.BuildCards(devs, cfg.Unit)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, cards: cards, minors: make(map[string]int, len(devs))}
	uuids := make([]string, 0, len(devs))
	for _, d := range devs {
		n.minors[d.UUID] = d.Minor
		uuids = append(uuids, d.UUID)
	}
	n.health = nodecards.NewHealth(cfg.Clock, cfg.HealthRecovery, cards)
	n.faults = nodecards.NewFaultLog(uuids)
	if cfg.Pods == nil {
		n.factory, n.cfg.Pods = podInformer(cfg.Client, cfg.Name)
	}
	return n, nil
}

// validate refuses what New cannot work without and fills in the defaults.
func (c *Config) validate() error {
	switch {
	case c.Name == "":
		return errors.New("node name is empty")
	case c.Unit.MiB <= 0:
		return errors.New("memory unit is not set")
	case c.NVML == nil || c.Client == nil:
		return errors.New("NVML and API client are required")
	case c.Usage.Interval < 0:
		return fmt.Errorf("usage interval %v is negative", c.Usage.Interval)
	}
	if err := c.Usage.OverGrant.Validate(); err != nil {
		return err
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.HealthRecovery <= 0 {
		c.HealthRecovery = DefaultHealthRecovery
	}
	if c.Recorder == nil {
		c.Recorder = &record.FakeRecorder{} // no Events channel: drops every event
	}
	return nil
}

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Client is the API client.
func (n *Node) Client() kubernetes.Interface { return n.cfg.Client }

// Recorder receives the events on the node and its pods (never nil).
func (n *Node) Recorder() record.EventRecorder { return n.cfg.Recorder }

// NVML is the node's NVML (real or simulated).
func (n *Node) NVML() gpunvml.Interface { return n.cfg.NVML }

// Simulated reports whether NVML is the simulator.
func (n *Node) Simulated() bool { return n.cfg.Simulated }

// Unit is the node's gpu-mem unit.
func (n *Node) Unit() gpushare.Unit { return n.cfg.Unit }

// Clock is the node's clock (never nil).
func (n *Node) Clock() clock.WithTicker { return n.cfg.Clock }

// NodeResync is Config.NodeResync as given.
func (n *Node) NodeResync() time.Duration { return n.cfg.NodeResync }

// Usage is the usage watchdog's settings.
func (n *Node) Usage() Usage { return n.cfg.Usage }

// Cards are the node's cards in index order, all marked healthy (Health says which are);
// callers must not change them.
func (n *Node) Cards() []gpushare.Device { return n.cards }

// Minors is each card's device-node minor number by UUID (-1: unknown); callers must not
// change it.
func (n *Node) Minors() map[string]int { return n.minors }

// Health tracks the cards' health; WatchHealth feeds it.
func (n *Node) Health() *nodecards.Health { return n.health }

// Faults is each card's latest critical XID, as WatchHealth relays them.
func (n *Node) Faults() *nodecards.FaultLog { return n.faults }

// Inventory is the cards in the node's unit, each with its health now.
func (n *Node) Inventory() gpushare.Inventory {
	return nodecards.Inventory(n.cards, n.cfg.Unit, n.health.Healthy)
}
