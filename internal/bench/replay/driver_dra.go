package replay

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/internal/bench/parallel"
)

// publishSlices creates the DeviceClass (kept if it exists) and the nodes' ResourceSlices,
// workers at a time, as the nodes' DRA plugins would publish them.
func (d *driver) publishSlices(ctx context.Context, slices []*resourceapi.ResourceSlice, workers int) error {
	class := objects.DeviceClass()
	if _, err := d.Client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating DeviceClass %s: %w", class.Name, err)
	}
	klog.InfoS("publishing ResourceSlices", "count", len(slices))
	return parallel.ForEach(ctx, len(slices), workers, func(ctx context.Context, i int) error {
		if _, err := d.Client.ResourceV1().ResourceSlices().Create(ctx, slices[i], metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ResourceSlice %s: %w", slices[i].Name, err)
		}
		return nil
	})
}

// podObjects returns the pod of p and, on a DRA replay, its ResourceClaim (nil for a
// CPU-only pod or without DRA).
func (d *driver) podObjects(p PodSpec) (*corev1.Pod, *resourceapi.ResourceClaim, error) {
	if d.Objects.DRA {
		return d.Objects.draPod(p)
	}
	pod, err := d.Objects.Pod(p)
	return pod, nil, err
}

// createClaim creates claim; nil does nothing.
func (d *driver) createClaim(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	if claim == nil {
		return nil
	}
	if _, err := d.Client.ResourceV1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ResourceClaim %s: %w", claim.Name, err)
	}
	return nil
}

// deleteClaim deletes the claim of a pod that failed and was deleted; nil does nothing.
func (d *driver) deleteClaim(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	if claim == nil {
		return nil
	}
	err := d.Client.ResourceV1().ResourceClaims(claim.Namespace).Delete(ctx, claim.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ResourceClaim %s of a failed pod: %w", claim.Name, err)
	}
	return nil
}

// claimedMilli reads the allocation of bound pod p's claim (the scheduler writes it before
// binding) and returns the GPU-milli it holds; model is the node's card model. Errors: the
// claim unreadable or not allocated.
func (d *driver) claimedMilli(ctx context.Context, p PodSpec, model string) (int64, error) {
	_, want, err := d.Objects.draPod(p)
	if err != nil {
		return 0, err
	}
	claim, err := d.Client.ResourceV1().ResourceClaims(want.Namespace).Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("reading ResourceClaim %s of a bound pod: %w", want.Name, err)
	}
	if claim.Status.Allocation == nil {
		return 0, fmt.Errorf("ResourceClaim %s: its pod is bound but the claim is not allocated", want.Name)
	}
	card := d.Objects.Units.CardUnits(model)
	return d.Objects.claimedUnits(claim, card) * 1000 / card, nil
}
