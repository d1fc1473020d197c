package dra

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// observed is the driver as kubelet calls it, counting each claim's outcome in metrics.
type observed struct {
	*Driver
	m *metrics
}

var _ kubeletplugin.DRAPlugin = observed{}

func (o observed) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out, err := o.Driver.PrepareResourceClaims(ctx, claims)
	if err != nil {
		o.m.prepareFailed.WithLabelValues(prepareReason(err)).Add(float64(len(claims)))
		return out, err
	}
	for _, r := range out {
		if r.Err != nil {
			o.m.prepareFailed.WithLabelValues(prepareReason(r.Err)).Inc()
			continue
		}
		o.m.prepared.Inc()
	}
	return out, nil
}

func (o observed) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out, err := o.Driver.UnprepareResourceClaims(ctx, claims)
	if err != nil {
		// Only the checkpoint fails the whole call.
		o.m.unprepareFailed.WithLabelValues(reasonCheckpoint).Add(float64(len(claims)))
		return out, err
	}
	for _, e := range out {
		if e != nil {
			o.m.unprepareFailed.WithLabelValues(reasonCDISpec).Inc()
			continue
		}
		o.m.unprepared.Inc()
	}
	return out, nil
}
