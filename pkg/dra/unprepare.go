package dra

import (
	"context"
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/nodecards"
)

// UnprepareResourceClaims removes each claim's CDI spec and forgets it, so its memory is
// free for the next claims. A claim not prepared (already unprepared, or never by this
// node) only has its spec removed if one is left: kubelet repeats unprepare after
// restarts. A claim whose spec cannot be removed stays recorded and fails, to be retried.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	next := maps.Clone(d.prepared)
	for _, c := range claims {
		if err := nodecards.RemoveClaimSpec(d.cfg.Specs.Dir, c.UID); err != nil {
			klog.FromContext(ctx).Error(err, "Unpreparing a claim failed", "claim", c.String())
			out[c.UID] = err
			continue
		}
		delete(next, c.UID)
		out[c.UID] = nil
	}
	if len(next) == len(d.prepared) {
		return out, nil
	}
	if err := saveCheckpoint(d.checkpoint, d.cfg.Inventory.Unit, next); err != nil {
		// The specs are gone but the checkpoint still holds the claims: kubelet retries
		// the whole call, which then finds the specs gone and records it.
		return nil, fmt.Errorf("unpreparing %d claims: %w", len(claims), err)
	}
	d.prepared = next
	return out, nil
}
