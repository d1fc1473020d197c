package scale

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// createAttempts bounds the retries of one create: on 2 shared cores the API server
// occasionally answers a create with a timeout after a minute of starvation.
const createAttempts = 5

// createPod creates pod, retrying transient API errors (see createRetrying).
func (b *Bench) createPod(ctx context.Context, pod *corev1.Pod) error {
	return createRetrying(ctx, "pod "+pod.Name, func(ctx context.Context) error {
		_, err := b.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
}

// createClaim creates claim, retrying transient API errors (see createRetrying).
func (b *Bench) createClaim(ctx context.Context, claim *resourceapi.ResourceClaim) error {
	return createRetrying(ctx, "resource claim "+claim.Name, func(ctx context.Context) error {
		_, err := b.Client.ResourceV1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{})
		return err
	})
}

// createRetrying calls create, retrying transient API errors (timeouts, throttling,
// internal errors). AlreadyExists after a failed attempt counts as created: the timed-out
// request went through. Errors: a permanent API error, or the last transient one, naming
// what was created.
func createRetrying(ctx context.Context, what string, create func(context.Context) error) error {
	var err error
	for attempt := 1; attempt <= createAttempts; attempt++ {
		err = create(ctx)
		switch {
		case err == nil:
			return nil
		case attempt > 1 && apierrors.IsAlreadyExists(err):
			return nil
		case !transient(err) || ctx.Err() != nil:
			return fmt.Errorf("creating %s: %w", what, err)
		}
		klog.InfoS("create failed, retrying", "object", what, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
	return fmt.Errorf("creating %s after %d attempts: %w", what, createAttempts, err)
}

func transient(err error) bool {
	return apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}
