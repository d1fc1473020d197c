package deviceplugin

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// Run first refuses a unit change under running pods (checkUnitChange), then watches card
// health, keeps the node's GPU facts current, and serves and registers
// the plugin with kubelet (again after each kubelet restart). It waits for the pod informer
// to sync before registering, since Allocate reads it, then adopts into the ledger the pods
// an earlier process served (adoptServedPods), with cdi-allocation removes the specs of
// pods that went meanwhile (removeStaleAllocationSpecs), keeps their allocation records true
// (keepAllocationRecordsTrue) and, with a UsageInterval, runs the usage watchdog. Returns
// when ctx is done, or early with an error when the unit changed under running pods, the
// informer never syncs or the plugin folder cannot be watched.
func (p *Plugin) Run(ctx context.Context) error {
	// Before anything publishes the node's inventory in the new unit.
	if err := p.checkUnitChange(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	faults := make(chan gpunvml.Fault, 16)
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := p.cfg.NVML.WatchFaults(ctx, faults); err != nil {
			klog.ErrorS(err, "GPU health is not watched")
		}
	}()
	go func() {
		defer wg.Done()
		p.health.Run(ctx, faults)
	}()
	go func() {
		defer wg.Done()
		p.keepNodeCurrent(ctx)
	}()

	if !cache.WaitForCacheSync(ctx.Done(), p.cfg.Pods.HasSynced) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("pod informer of node %s never synced", p.cfg.NodeName)
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
	if p.cfg.UsageInterval > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.usage.Run(ctx)
		}()
	}
	return p.serveAndRegister(ctx)
}
