package noderuntime

import (
	"context"
	"sync"

	"k8s.io/klog/v2"

	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// WatchHealth watches NVML's XID faults and hands each through the fault relay (Faults) to
// the health tracker (Health), until ctx is done. A fault watch NVML cannot start is
// logged and leaves every card healthy: the back end still serves.
func (n *Node) WatchHealth(ctx context.Context) {
	raw, relayed := make(chan gpunvml.Fault, 16), make(chan gpunvml.Fault)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := n.cfg.NVML.WatchFaults(ctx, raw); err != nil {
			klog.ErrorS(err, "GPU health is not watched")
		}
	}()
	go func() { defer wg.Done(); n.faults.Relay(ctx, raw, relayed) }()
	go func() { defer wg.Done(); n.health.Run(ctx, relayed) }()
}
