package noderuntime

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// LimitUnsupported says why the node's driver or cgroups cannot enforce per-cgroup memory
// limits; nil: they can.
func (n *Node) LimitUnsupported() error { return n.cfg.LimitUnsupported }

// IsolationBlocked says why the node's container runtime gives a container cards beyond
// those it was handed (Config.IsolationBlocker, read now); nil: it does not, or it is not
// checked.
func (n *Node) IsolationBlocked() error {
	if n.cfg.IsolationBlocker == nil {
		return nil
	}
	return n.cfg.IsolationBlocker()
}

// LimitUnavailable says why the node cannot enforce gpushare.IsolationLimit: the driver or
// cgroups cannot (LimitUnsupported), or the container runtime gives a container cards it
// was not handed (IsolationBlocked). nil: it can, as far as the node goes; each back end
// adds its own conditions.
func (n *Node) LimitUnavailable() error {
	if n.cfg.LimitUnsupported != nil {
		return n.cfg.LimitUnsupported
	}
	return n.IsolationBlocked()
}

// PublishEnforcedIsolation sets node's gpushare.LabelIsolationEnforced to what the back end
// enforces for its gpushare.LabelIsolation, as enforced says, with the node's client and
// recorder (nodecards.PublishEnforcedIsolation). Errors: the patch of the node fails.
func (n *Node) PublishEnforcedIsolation(ctx context.Context, node *corev1.Node, enforced func(asked gpushare.Isolation) (gpushare.Isolation, error)) error {
	return nodecards.PublishEnforcedIsolation(ctx, n.cfg.Client, n.cfg.Recorder, node, enforced)
}
