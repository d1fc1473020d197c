package scale

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/bench/objects"
	"github.com/gpushare/gpushare/internal/bench/parallel"
)

// PublishDRA creates the DeviceClass and, for nodes NodeName(0..n-1), the ResourceSlice
// their DRA back end would publish (no kubelet plugin runs: the bench is its publisher).
// The burst node gets none. Existing objects are left as they are. Errors: API failures.
func (b *Bench) PublishDRA(ctx context.Context, n int) (SetupResult, error) {
	start := time.Now()
	dc := objects.DeviceClass()
	if _, err := b.Client.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return SetupResult{}, fmt.Errorf("creating DeviceClass %s: %w", dc.Name, err)
	}
	klog.InfoS("publishing ResourceSlices", "count", n, "workers", b.workers())
	err := parallel.ForEach(ctx, n, b.workers(), func(ctx context.Context, i int) error {
		s, err := b.Objects.ResourceSlice(NodeName(i))
		if err != nil {
			return err
		}
		return createRetrying(ctx, "ResourceSlice "+s.Name, func(ctx context.Context) error {
			_, err := b.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	})
	if err != nil {
		return SetupResult{}, err
	}
	res := SetupResult{Nodes: n, Seconds: time.Since(start).Seconds()}
	klog.InfoS("ResourceSlices published", "count", n, "seconds", res.Seconds)
	return res, nil
}

// createClaims creates the claims of pods 0..len(shapes)-1 of set. Errors: API failures.
func (b *Bench) createClaims(ctx context.Context, set string, shapes []PodShape) error {
	return parallel.ForEach(ctx, len(shapes), b.workers(), func(ctx context.Context, i int) error {
		return b.createClaim(ctx, b.Objects.Claim(set, i, shapes[i]))
	})
}

// setClaims lists the claims of set by namespace/name. Errors: API failures.
func (b *Bench) setClaims(ctx context.Context, set string) (map[string]*resourceapi.ResourceClaim, error) {
	list, err := b.Client.ResourceV1().ResourceClaims(b.Objects.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelSet + "=" + set})
	if err != nil {
		return nil, fmt.Errorf("listing the resource claims of set %s: %w", set, err)
	}
	out := make(map[string]*resourceapi.ResourceClaim, len(list.Items))
	for i := range list.Items {
		c := &list.Items[i]
		out[c.Namespace+"/"+c.Name] = c
	}
	return out, nil
}

// deleteClaims deletes the claims of set, once its pods are gone. The scheduler adds a
// finalizer when it allocates a claim, which kube-controller-manager's resource claim
// controller would lift after deallocating; none runs here, so the bench drops the
// finalizer itself (the scheduler forgets a deleted claim's allocation). Errors: API failures.
func (b *Bench) deleteClaims(ctx context.Context, set string) error {
	claims, err := b.setClaims(ctx, set)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": nil}})
	if err != nil {
		return fmt.Errorf("encoding the finalizer patch: %w", err)
	}
	api := b.Client.ResourceV1().ResourceClaims(b.Objects.Namespace)
	names := make([]string, 0, len(claims))
	for _, c := range claims {
		names = append(names, c.Name)
	}
	var zero int64
	err = parallel.ForEach(ctx, len(names), b.workers(), func(ctx context.Context, i int) error {
		if _, err := api.Patch(ctx, names[i], types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("dropping the finalizers of resource claim %s: %w", names[i], err)
		}
		if err := api.Delete(ctx, names[i], metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting resource claim %s: %w", names[i], err)
		}
		return nil
	})
	if err == nil && len(names) > 0 {
		klog.InfoS("resource claims deleted", "set", set, "count", len(names))
	}
	return err
}
