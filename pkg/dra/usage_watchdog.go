package dra

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/nodecards"
	"github.com/gpushare/gpushare/pkg/noderuntime"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

// newUsageWatchdog is the node's usage watchdog (noderuntime.Node.NewWatchdog), granting
// each container what the driver's prepared claims it names hold (usageLedger); nil when
// the node's Usage has no Interval.
func newUsageWatchdog(n *noderuntime.Node, d *Driver) *watchdog.Watchdog {
	if n.Usage().Interval <= 0 {
		return nil
	}
	pods := n.Pods()
	ledger := usageLedger{pods: func() []*corev1.Pod { return nodecards.PodsIn(pods.GetStore()) }, prepared: d.preparedClaims}
	return n.NewWatchdog(ledger, n.NodeResync())
}

// runUsage runs w once the pod informer has synced, until ctx is done: before that the
// pod view would charge every process to no pod.
func runUsage(ctx context.Context, w *watchdog.Watchdog, pods cache.SharedIndexInformer) {
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		if ctx.Err() == nil {
			klog.ErrorS(nil, "The node's pod informer never synced; the usage watchdog does not run")
		}
		return
	}
	w.Run(ctx)
}
