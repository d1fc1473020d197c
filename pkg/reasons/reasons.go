// Package reasons words why a node cannot take a pod, alike for both front ends of the
// ledger: the HTTP extender (pkg/routes) and the kube-scheduler framework plugin
// (pkg/schedulerplugin), at filter and, for a card choice that fails at bind, in pkg/binding.
// Users read these words in `kubectl describe pod`.
package reasons

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
)

// Rejection is why one node fails filter for a pod.
type Rejection struct {
	// Reason is shown to users in the pod's scheduling events.
	Reason string
	// Label is the reason label of gpushare_filter_rejections_total (metrics.Reject*).
	Label string
	// Resolvable: evicting pods could make room. Otherwise the scheduler should not preempt
	// for this node (the extender's FailedAndUnresolvableNodes, the plugin's
	// UnschedulableAndUnresolvable).
	Resolvable bool
}

// Wording words rejections for one resource naming and node selector.
type Wording struct {
	memName      string // the gpu-mem resource's name after '/', prefix of fit reasons
	nodeSelector string
}

// NewWording returns the Wording of a front end serving res on the nodes nodeSelector
// (e.g. "cgpu=true") selects.
func NewWording(res gpushare.Resources, nodeSelector string) Wording {
	return Wording{memName: ShortName(string(res.Mem)), nodeSelector: nodeSelector}
}

// ShortName is a resource name after its last '/' ("gpu-mem" for aliyun.com/gpu-mem), the
// prefix of per-card reasons.
func ShortName(resource string) string {
	if i := strings.LastIndexByte(resource, '/'); i >= 0 {
		return resource[i+1:]
	}
	return resource
}

// Reject classifies an error of cache.Fits, cache.PlaceWith or cache.Reserve for a node. A
// node whose inventory is out of range reads e.g. "node's GPU inventory is out of range, it
// takes no GPU pod until fixed: annotation gpushare.io/gpu-inventory: card 0 units
// 9000000000000000000 out of range 0..4294967296". An isolation refusal reads as the ledger
// words it, e.g. "node isolates cards with MPS
// (gpushare.io/isolation=mps): one card per container, and container "main" asks for 2". The
// per-card shortfall reads e.g. "gpu-mem: need 10 on one card; largest free 8 (card0 8/16,
// card1 8/16)"; for a pod with a card choice, e.g. "gpu-mem: no card of type A100 with 8
// free units (card2 4/40)". A card choice by compute share (cache.ComputeError) reads as the
// ledger words it, unresolvable.
func (r Wording) Reject(err error) Rejection {
	var (
		fit    *policy.FitError
		iso    *cache.IsolationError
		inv    *cache.InventoryError
		choice *cache.ChoiceError
		comp   *cache.ComputeError
	)
	switch {
	case errors.Is(err, cache.ErrUnknownNode):
		return Rejection{Reason: r.NotGPUNode(), Label: metrics.RejectUnknownNode}
	case errors.As(err, &inv):
		return Rejection{Reason: inv.Error(), Label: metrics.RejectInventory}
	case errors.Is(err, cache.ErrNoCards):
		return Rejection{Reason: r.NotGPUNode(), Label: metrics.RejectNoCards}
	case errors.As(err, &iso):
		return Rejection{Reason: iso.Error(), Label: metrics.RejectIsolation}
	case errors.As(err, &choice):
		// No allowed card at all: evicting pods cannot help.
		return Rejection{Reason: r.memName + ": " + choice.Error(), Label: metrics.RejectCardShortfall, Resolvable: choice.Fit != nil}
	case errors.As(err, &comp):
		// The preemption dry runs count memory alone: evicting pods is not tried for compute.
		return Rejection{Reason: comp.Error(), Label: metrics.RejectCardShortfall}
	case errors.As(err, &fit):
		return Rejection{Reason: r.memName + ": " + fit.Error(), Label: metrics.RejectCardShortfall, Resolvable: true}
	default:
		return Rejection{Reason: r.memName + ": " + err.Error(), Label: metrics.RejectCardShortfall, Resolvable: true}
	}
}

// NotGPUNode is the reason for a node the ledger does not account.
func (r Wording) NotGPUNode() string {
	return fmt.Sprintf("not a gpushare node (no %s label or no %s)", r.nodeSelector, r.memName)
}

// HeldElsewhere is the reason for every node but the one where an earlier bind of the pod
// holds its cards (cache.HeldOn): its Binding may still land, so no other node may take
// the pod.
func HeldElsewhere(node string) string {
	return "an earlier bind of this pod to node " + node + " holds its cards and may still land"
}

// FitReason is the reason of a card choice that failed at bind (cache.Reserve's
// *policy.FitError), worded as filter words it.
func (r Wording) FitReason(fit *policy.FitError) string { return r.memName + ": " + fit.Error() }
