package dra

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
	"github.com/gpushare/gpushare/pkg/watchdog"
)

// UsageConfig is the usage watchdog of the DRA back end (pkg/watchdog), as share-plugin's
// --usage-interval, --over-grant-*, --unclaimed-exempt-namespaces and --proc-root set it
// on the device-plugin path.
type UsageConfig struct {
	// Interval is how often the watchdog lists the cards' processes; 0: no watchdog.
	Interval time.Duration
	// Pods is an informer of the node's pods (field selector spec.nodeName=NodeName),
	// started by the caller: the watchdog's pod view. Required with an Interval.
	Pods cache.SharedIndexInformer
	// OverGrant is the watchdog's threshold, grace and action.
	OverGrant watchdog.OverGrant
	// UnclaimedExemptNamespaces are namespaces whose pods may use cards without a claim.
	UnclaimedExemptNamespaces []string
	// ProcRoot is where the watchdog reads /proc/<pid>/cgroup (default /proc).
	ProcRoot string
}

// newUsageWatchdog is the usage watchdog over cards, granting each container what the
// driver's prepared claims it names hold (usageLedger); nil when rc.Usage has no Interval.
// Errors: an Interval without Pods, an invalid OverGrant.
func newUsageWatchdog(rc RunConfig, cards []gpushare.Device, clk clock.Clock, d *Driver) (*watchdog.Watchdog, error) {
	u := rc.Usage
	if u.Interval <= 0 {
		return nil, nil
	}
	if u.Pods == nil {
		return nil, fmt.Errorf("the usage watchdog needs the node's pod informer")
	}
	if err := u.OverGrant.Validate(); err != nil {
		return nil, err
	}
	ticker, ok := clk.(clock.WithTicker)
	if !ok {
		ticker = clock.RealClock{}
	}
	recorder := rc.Recorder
	if recorder == nil {
		recorder = &record.FakeRecorder{} // no Events channel: drops every event
	}
	ledger := usageLedger{pods: func() []*corev1.Pod { return nodecards.PodsIn(u.Pods.GetStore()) }, prepared: d.preparedClaims}
	return watchdog.New(watchdog.Config{
		NodeName: rc.NodeName, Cards: cards, Unit: rc.Unit, Processes: rc.NVML.Processes,
		Client: rc.Client, Recorder: recorder, Clock: ticker,
		Interval: u.Interval, Resync: rc.NodeResync, OverGrant: u.OverGrant, ProcRoot: u.ProcRoot,
		Unclaimed: watchdog.Unclaimed{ExemptNamespaces: u.UnclaimedExemptNamespaces},
	}, ledger), nil
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
