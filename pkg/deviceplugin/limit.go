package deviceplugin

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// DefaultLimitHookPath is where the share-plugin DaemonSet installs gpushare-limit-hook on
// the host (share-plugin's --limit-hook-path).
const DefaultLimitHookPath = "/var/lib/gpushare/bin/gpushare-limit-hook"

// limitUnavailable says why this node cannot enforce gpushare.IsolationLimit: the hook
// rides on the per-allocation CDI spec, so it needs the cdi-allocation strategy, and the
// driver must support per-cgroup limits (Config.LimitUnsupported). nil: it can.
func (p *Plugin) limitUnavailable() error {
	if p.cfg.DeviceListStrategy != DeviceListCDIAllocation {
		return fmt.Errorf("the limit hook is named by the per-allocation CDI spec, and share-plugin runs with --device-list-strategy=%s, not %s",
			p.cfg.DeviceListStrategy, DeviceListCDIAllocation)
	}
	return p.cfg.LimitUnsupported
}

// isolationUnavailable says why this node cannot enforce iso, the mode its label asks:
// limits need limitUnavailable's conditions, and both limits and MPS need a runtime that
// gives a container no card it was not handed (Config.IsolationBlocker). nil: it can, or iso
// promises nothing.
func (p *Plugin) isolationUnavailable(iso gpushare.Isolation) error {
	switch iso {
	case gpushare.IsolationLimit:
		if err := p.limitUnavailable(); err != nil {
			return err
		}
	case gpushare.IsolationMPS:
	default:
		return nil
	}
	if p.cfg.IsolationBlocker != nil {
		return p.cfg.IsolationBlocker()
	}
	return nil
}

// enforcedIsolation is what the node really enforces for the mode its label asks: iso, or
// IsolationNone with why where the node cannot enforce it (Allocate then refuses its GPU
// containers, so none runs believing it is held to its grant).
func (p *Plugin) enforcedIsolation(iso gpushare.Isolation) (gpushare.Isolation, error) {
	if why := p.isolationUnavailable(iso); why != nil {
		return gpushare.IsolationNone, why
	}
	return iso, nil
}

// limitHook is nodecards.LimitHook for a container holding units[i] units on cards[i], with
// this plugin's hook path, simulated cards, failure folder and unit.
func (p *Plugin) limitHook(cards []gpushare.Device, units []int64) *cdi.Hook {
	c := nodecards.LimitHookConfig{Path: p.cfg.LimitHookPath, SimulatedCardDir: p.cfg.SimulatedCardDir, FailureDir: p.cfg.LimitHookFailureDir}
	return nodecards.LimitHook(c, p.cfg.Unit, cards, units)
}

// publishEnforcedIsolation publishes what this plugin enforces for the node's isolation
// label (nodecards.PublishEnforcedIsolation with enforcedIsolation).
func (p *Plugin) publishEnforcedIsolation(ctx context.Context, node *corev1.Node) error {
	return nodecards.PublishEnforcedIsolation(ctx, p.cfg.Client, p.cfg.Recorder, node, p.enforcedIsolation)
}
