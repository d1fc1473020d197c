package deviceplugin

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// DefaultLimitHookPath is where the share-plugin DaemonSet installs gpushare-limit-hook on
// the host (share-plugin's --limit-hook-path).
const DefaultLimitHookPath = "/var/lib/gpushare/bin/gpushare-limit-hook"

// limitUnavailable says why this node cannot enforce gpushare.IsolationLimit: the hook
// rides on the per-allocation CDI spec, so it needs the cdi-allocation strategy, and the
// driver must support per-cgroup limits (the node's LimitUnsupported). nil: it can.
func (p *Plugin) limitUnavailable() error {
	if p.cfg.DeviceListStrategy != DeviceListCDIAllocation {
		return fmt.Errorf("the limit hook is named by the per-allocation CDI spec, and share-plugin runs with --device-list-strategy=%s, not %s",
			p.cfg.DeviceListStrategy, DeviceListCDIAllocation)
	}
	return p.node.LimitUnsupported()
}

// isolationUnavailable says why this node cannot enforce iso, the mode its label asks:
// limits need limitUnavailable's conditions, and both limits and MPS need a runtime that
// gives a container no card it was not handed (the node's IsolationBlocked). nil: it can, or iso
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
	return p.node.IsolationBlocked()
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

// limitHooks are the createRuntime hooks that hold candidate c's container, which decision
// d serves, to its grant (soft limit) and its memory limit (hard limit; the grant where its
// pod declares none, c.req, gpushare.AnnotationMemLimit) on each of d.cards, with the
// variables they read: gpushare-limit-hook (limitHook), or NVIDIA's toolkit hook where
// NVIDIACDIHookPath is set (nodecards.ToolkitLimitHooks, no pod-level limit). Errors:
// limitHook's; *refusal for a container whose limit per card is above the card it got.
func (p *Plugin) limitHooks(c candidate, d cardDecision) ([]*cdi.Hook, map[string]string, error) {
	var limits []int64
	if c.cont.Limited() {
		for _, card := range d.cards {
			if c.cont.LimitPerCard() > card.Units {
				return nil, nil, &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: its GPU-memory limit (%s) of %d units per card is above card %d (%s, %d units)",
					c.cont.Name, klog.KObj(c.pod), gpushare.AnnotationMemLimit, c.cont.LimitPerCard(), card.Index, card.UUID, card.Units)}
			}
			limits = append(limits, c.cont.LimitPerCard())
		}
	}
	if p.cfg.NVIDIACDIHookPath != "" {
		hooks, env := nodecards.ToolkitLimitHooks(nodecards.ToolkitHookConfig{Path: p.cfg.NVIDIACDIHookPath, DriverRoot: p.cfg.NVIDIADriverRoot},
			p.node.Unit(), d.cards, c.cont.PerCard(), c.cont.LimitPerCard())
		return hooks, env, nil
	}
	h, err := p.limitHook(c, d, limits)
	if err != nil {
		return nil, nil, err
	}
	return []*cdi.Hook{h}, nil, nil
}

// limitHook is nodecards.LimitHook for candidate c's container, which decision d serves,
// with this plugin's hook path, simulated cards, failure folder and unit: the container is
// held to d.units on d.cards, and the pod to what its whole allocation d.alloc holds on each
// of its cards (podGrant), as soft and hard limit; where the container has memory limits
// (limits, per card of d.cards) those are its hard limits, and where the pod's containers
// do, the pod's hard limits are theirs summed the same way. Errors: a card of the pod's
// allocation that the node does not have.
func (p *Plugin) limitHook(c candidate, d cardDecision, limits []int64) (*cdi.Hook, error) {
	grant, err := p.podGrant(c.pod, c.req, d.alloc)
	if err != nil {
		return nil, err
	}
	cfg := nodecards.LimitHookConfig{Path: p.cfg.LimitHookPath, SimulatedCardDir: p.cfg.SimulatedCardDir, FailureDir: p.cfg.LimitHookFailureDir}
	return nodecards.LimitHook(cfg, p.node.Unit(), d.cards, d.units, limits, grant), nil
}

// podGrant is what pod holds on each card of its allocation, in units: its usage there
// (gpushare.PodAllocation.CardUsage, what its containers running at once may hold, as the
// ledger counts it), card index order; and, where req gives containers memory limits, the
// same usage of its limits (gpushare.PodRequest.LimitAllocation), capped at the card. This is
// the pod-level limit: every container of the pod, including one that requests no gpu-mem and
// so has no hook or limit of its own, runs under the pod's cgroup, which the hook holds to it.
// Errors: a card the node does not have.
func (p *Plugin) podGrant(pod *corev1.Pod, req gpushare.PodRequest, alloc gpushare.PodAllocation) (nodecards.PodGrant, error) {
	usage := alloc.CardUsage(pod)
	var limits gpushare.CardUnits
	if req.Limited() {
		limits = req.LimitAllocation(alloc).CardUsage(pod)
	}
	g := nodecards.PodGrant{UID: pod.UID}
	for _, i := range slices.Sorted(maps.Keys(usage)) {
		card, ok := p.cards.ByIndex(i)
		if !ok {
			return nodecards.PodGrant{}, fmt.Errorf("pod %s: its allocation names card %d, which this node does not have (cards: %s)", klog.KObj(pod), i, indexList(p.cards.List()))
		}
		if usage[i] <= 0 {
			continue
		}
		g.Cards = append(g.Cards, card)
		g.Units = append(g.Units, usage[i])
		if limits != nil {
			g.Limits = append(g.Limits, min(max(limits[i], usage[i]), max(card.Units, usage[i])))
		}
	}
	return g, nil
}

// publishEnforcedIsolation publishes what this plugin enforces for the node's isolation
// label (nodecards.PublishEnforcedIsolation with enforcedIsolation).
func (p *Plugin) publishEnforcedIsolation(ctx context.Context, node *corev1.Node) error {
	return nodecards.PublishEnforcedIsolation(ctx, p.node.Client(), p.node.Recorder(), node, p.enforcedIsolation)
}
