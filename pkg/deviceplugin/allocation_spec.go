package deviceplugin

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/limithook"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// envCUDAVisibleDevices is set to the container's card UUIDs, so that a value the pod sets
// itself does not decide which of its cards CUDA sees, or in which order.
const envCUDAVisibleDevices = "CUDA_VISIBLE_DEVICES"

// removeAllocationSpecs removes the spec files, and the simulated limit records, of the pod
// with uid (its grant was released: the pod is gone or finished, and no container of it
// starts again). Failures are logged; the next start's removeStaleAllocationSpecs tries
// again.
func (p *Plugin) removeAllocationSpecs(uid types.UID) {
	if p.cfg.DeviceListStrategy != DeviceListCDIAllocation {
		return
	}
	if _, _, err := nodecards.RemoveAllocationSpecs(p.cfg.CDISpecDir, func(u types.UID) bool { return u == uid }); err != nil {
		klog.ErrorS(err, "Removing the per-allocation CDI specs of a pod failed", "podUID", uid)
		return
	}
	p.removeLimitRecords(uid)
}

// removeLimitRecords removes, on simulated cards, the limit records gpushare-limit-hook
// wrote for the containers of the pod with uid, which go with its allocation specs: the
// cards' files would otherwise collect one per container ever started. Failures are logged.
func (p *Plugin) removeLimitRecords(uid types.UID) {
	if p.cfg.SimulatedCardDir == "" {
		return
	}
	if _, err := limithook.RemovePodRecords(p.cfg.SimulatedCardDir, string(uid)); err != nil {
		klog.ErrorS(err, "Removing the simulated limit records of a pod failed", "podUID", uid)
	}
}

// removeStaleAllocationSpecs removes the spec files, and the simulated limit records, of pods
// that no longer may hold memory on this node (not among pods, or finished): left by a
// process that stopped before their pods went. A container of a pod that still holds memory
// may restart and needs its spec again, so those stay. Returns how many files it removed.
func (p *Plugin) removeStaleAllocationSpecs(pods []*corev1.Pod) int {
	byUID := podsByUID(pods)
	gone, n, err := nodecards.RemoveAllocationSpecs(p.cfg.CDISpecDir, func(uid types.UID) bool {
		pod, ok := byUID[uid]
		return !ok || !holdsMemory(pod, p.node.Name())
	})
	if err != nil {
		klog.ErrorS(err, "Removing the per-allocation CDI specs of pods that are gone failed")
		return 0
	}
	for _, uid := range gone {
		p.removeLimitRecords(uid)
	}
	return n
}

// cardSpecs is how this plugin's per-allocation CDI specs give containers the cards: into
// CDISpecDir, as device nodes by the cards' minor numbers or, on simulated cards, as their
// files in SimulatedCardDir.
func (p *Plugin) cardSpecs() nodecards.CardSpecs {
	return nodecards.CardSpecs{Dir: p.cfg.CDISpecDir, Minors: p.node.Minors(), SimulatedCardDir: p.cfg.SimulatedCardDir}
}
