package deviceplugin

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Run first refuses a node labelled for another back end and a unit change under running
// pods (checkUnitChange), then starts the node's pod informer (when the node made it),
// watches card health (node.WatchHealth), keeps the node's GPU facts current, and serves
// and registers the plugin with kubelet (again after each kubelet restart). It waits for
// the pod informer to sync before registering, since Allocate reads it, then adopts into
// the ledger the pods an earlier process served (adoptServedPods), with cdi-allocation
// removes the specs of pods that went meanwhile (removeStaleAllocationSpecs), keeps their
// allocation records true (keepAllocationRecordsTrue) and, with a usage interval, runs the
// usage watchdog. Returns when ctx is done, or early with an error when the node is
// another back end's, the unit changed under running pods, the informer never syncs or
// the plugin folder cannot be watched.
func (p *Plugin) Run(ctx context.Context) error {
	if _, err := p.node.CheckBackend(ctx, gpushare.BackendDevicePlugin); err != nil {
		return err
	}
	// Before anything publishes the node's inventory in the new unit.
	if err := p.checkUnitChange(ctx); err != nil {
		return err
	}
	stopPods := p.node.StartPods(ctx) // after New added the ledger's handler
	defer stopPods()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	wg.Add(3)
	go func() {
		defer wg.Done()
		p.node.WatchHealth(ctx)
	}()
	go func() {
		defer wg.Done()
		p.keepMPSDaemonsReleased(ctx, min(mpsReleaseInterval, p.cfg.MPSReleaseGrace))
	}()
	go func() {
		defer wg.Done()
		p.keepNodeCurrent(ctx)
	}()

	if !cache.WaitForCacheSync(ctx.Done(), p.pods.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("pod informer of node %s never synced", p.node.Name())
	}
	pods := p.podsOnNode()
	if n := p.adoptServedPods(pods); n > 0 {
		klog.InfoS("Rebuilt the served-pod ledger from the pods' annotations", "pods", n)
	}
	if p.cfg.DeviceListStrategy == DeviceListCDIAllocation {
		if n := p.removeStaleAllocationSpecs(pods); n > 0 {
			klog.InfoS("Removed the per-allocation CDI specs of pods that are gone", "files", n, "dir", p.cfg.CDISpecDir)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.keepAllocationRecordsTrue(ctx)
	}()
	if p.node.Usage().Interval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.usage.Run(ctx)
		}()
	}
	return p.serveAndRegister(ctx)
}
