package dra

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// DriverConfig is what the driver (NewDriver) needs; Plugin fills it from the node.
type DriverConfig struct {
	// NodeName is this node's name, also the name of its pool.
	NodeName string
	// Inventory is the node's cards, each with its units of Inventory.Unit.
	Inventory gpushare.Inventory
	// Specs is where and how the claims' CDI specs show the cards.
	Specs nodecards.CardSpecs
	// CDIKind is the kind of the runtime's own card devices (<kind>=<UUID>, NVIDIA's spec
	// with UUID names): a card the runtime's CDI registry holds one for is handed over
	// through that device, before the claim's own. Empty: the claim's spec gives every card.
	CDIKind string
	// CDIRegistryDirs are the folders of the runtime's CDI registry; nil:
	// nodecards.RegistryDirs(Specs.Dir).
	CDIRegistryDirs []string
	// DataDir is the plugin's data folder, which holds the checkpoint.
	DataDir string
	// Healthy reports whether the card with a UUID takes new work; nil: all cards do.
	Healthy func(uuid string) bool
	// Isolation reads the node's gpushare.LabelIsolation now (gpushare.NodeIsolation); nil:
	// gpushare.IsolationNone.
	Isolation func(ctx context.Context) (gpushare.Isolation, error)
	// LimitHookPath is gpushare-limit-hook's path on the host, which a claim's spec names on
	// a node labelled gpushare.IsolationLimit.
	LimitHookPath string
	// LimitHookFailureDir is where the hook leaves a record of each failure (its
	// --failure-dir); empty: no records.
	LimitHookFailureDir string
	// LimitUnsupported says why the node cannot enforce gpushare.IsolationLimit; nil: it can.
	LimitUnsupported error
	// IsolationBlocker says why the node's container runtime gives a container cards it was
	// not handed, outside any limit (preflight.IsolationBlocker): limits are then refused
	// too. Called at each Prepare on a limit node, so a fixed configuration counts without
	// a restart. nil: not checked.
	IsolationBlocker func() error
	// Fatal is called with a background error the plugin cannot recover from (e.g. the
	// helper lost its gRPC server); nil: such errors are only logged.
	Fatal func(error)
}

// Driver answers kubelet's DRA calls: kubeletplugin.Start serves it, Plugin.Run starts it.
type Driver struct {
	cfg        DriverConfig
	cards      map[string]gpushare.Device // by DeviceName
	checkpoint string                     // the checkpoint file's path

	mu       sync.Mutex                  // serialises prepare and unprepare and guards prepared
	prepared map[types.UID]PreparedClaim // what the checkpoint holds
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// NewDriver builds the driver, loads the prepared claims of an earlier run and brings the claims'
// CDI specs in line with them (reconcileSpecs). Errors: an inventory without a card UUID or
// with two cards of one index, a checkpoint that cannot be read (the driver fails closed
// rather than forget prepared memory), prepared claims that count in another unit than
// Inventory.Unit or in one the checkpoint does not record (checkUnitChange), or a spec
// folder that cannot be listed or cleared of a leftover spec.
func NewDriver(cfg DriverConfig) (*Driver, error) {
	cards := make(map[string]gpushare.Device, len(cfg.Inventory.Devices))
	for _, c := range cfg.Inventory.Devices {
		name := DeviceName(c.Index)
		if _, dup := cards[name]; dup {
			return nil, fmt.Errorf("card index %d appears twice", c.Index)
		}
		if c.UUID == "" {
			return nil, fmt.Errorf("card %d has no UUID", c.Index)
		}
		cards[name] = c
	}
	path := filepath.Join(cfg.DataDir, CheckpointFile)
	prepared, recordedMiB, err := loadCheckpoint(path)
	if err != nil {
		return nil, err
	}
	if err := checkUnitChange(cfg.NodeName, cfg.Inventory.Unit, path, recordedMiB, prepared); err != nil {
		return nil, err
	}
	d := &Driver{cfg: cfg, cards: cards, checkpoint: path, prepared: prepared}
	if err := d.reconcileSpecs(); err != nil {
		return nil, err
	}
	return d, nil
}

// HandleError logs background errors of the kubelet plugin helper (e.g. a ResourceSlice
// the API server refused) and hands those that are not recoverable to DriverConfig.Fatal.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.cfg.Fatal != nil {
		d.cfg.Fatal(fmt.Errorf("%s: %w", msg, err))
	}
}

// WatchHealthStatus: card health reaches the scheduler as device taints in the
// ResourceSlice; per-device health reports to kubelet are not sent.
func (d *Driver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

// healthy reports whether the card with uuid takes new work.
func (d *Driver) healthy(uuid string) bool {
	return d.cfg.Healthy == nil || d.cfg.Healthy(uuid)
}
