package routes

import (
	"errors"
	"fmt"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
)

// rejection is why one node fails filter.
type rejection struct {
	reason string // shown to users in the pod's scheduling events
	label  string // gpushare_filter_rejections_total{reason}
	// resolvable: evicting pods could make room (FailedNodes); otherwise the node goes to
	// FailedAndUnresolvableNodes so the scheduler does not preempt for nothing.
	resolvable bool
}

// reject classifies an error of cache.Fits. The per-card shortfall reads e.g.
// "gpu-mem: need 10 on one card; largest free 8 (card0 8/16, card1 8/16)".
func (s *server) reject(err error) rejection {
	var fit *policy.FitError
	switch {
	case errors.Is(err, cache.ErrUnknownNode):
		return rejection{reason: s.notGPUNode(), label: metrics.RejectUnknownNode}
	case errors.Is(err, cache.ErrNoCards):
		return rejection{reason: s.notGPUNode(), label: metrics.RejectNoCards}
	case errors.As(err, &fit):
		return rejection{reason: s.memName + ": " + fit.Error(), label: metrics.RejectCardShortfall, resolvable: true}
	default:
		return rejection{reason: s.memName + ": " + err.Error(), label: metrics.RejectCardShortfall, resolvable: true}
	}
}

func (s *server) notGPUNode() string {
	return fmt.Sprintf("not a gpushare node (no %s label or no %s)", s.NodeSelector, s.memName)
}
