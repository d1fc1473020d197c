package watchdog

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// DefaultUnclaimedRepeat is how long the watchdog stays quiet about a pod that keeps using a
// card it holds nothing on, after its GPUMemoryUnclaimed event (Unclaimed.Repeat).
const DefaultUnclaimedRepeat = time.Hour

// Unclaimed configures what the watchdog does about GPU memory used by pods on cards they
// hold nothing on (Config.Unclaimed).
type Unclaimed struct {
	// ExemptNamespaces hold pods that use cards without gpu-mem by design (an MPS daemon, a
	// GPU operator's monitoring): their processes stay unattributed and are not reported.
	ExemptNamespaces []string
	// Repeat is the least time between two events about one pod and card
	// (0: DefaultUnclaimedRepeat).
	Repeat time.Duration
}

// podCard is one pod on one card (NVML index).
type podCard struct {
	pod  types.UID
	card int
}

// unclaimedUsage is what the processes of one pod use on a card the pod holds no gpu-mem
// on: the pod requested no gpu-mem at all, or its containers hold other cards. Such use
// comes from a container that reached a card it was not handed (NVIDIA_VISIBLE_DEVICES
// widened by the pod's own env, a privileged container, a device mounted by hand).
type unclaimedUsage struct {
	pod     *corev1.Pod
	card    gpushare.Device
	used    uint64 // bytes: the sum of its processes' known use
	unknown bool   // NVML could not tell the use of some of its processes
}

// addUnclaimed charges process pr of pod to its use of card without a grant.
func (s *usageSample) addUnclaimed(pod *corev1.Pod, card gpushare.Device, pr gpunvml.Process) {
	key := podCard{pod.UID, card.Index}
	u := s.unclaimed[key]
	if u == nil {
		u = &unclaimedUsage{pod: pod, card: card}
		s.unclaimed[key] = u
	}
	u.used += pr.UsedBytes
	u.unknown = u.unknown || !pr.UsedKnown
}

// reportUnclaimed sends a GPUMemoryUnclaimed Warning event on each pod of the sample that
// uses a card it holds nothing on: at once (a process of a pod on a card it was not given
// is a fact, not a fluctuation), then at most once per Repeat while it goes on. Pods that
// left the sample are forgotten, so a pod that comes back is reported again.
func (w *Watchdog) reportUnclaimed(s usageSample) {
	repeat := w.cfg.Unclaimed.Repeat
	if repeat <= 0 {
		repeat = DefaultUnclaimedRepeat
	}
	for key, u := range s.unclaimed {
		if u.pod.DeletionTimestamp != nil {
			continue
		}
		if last, ok := w.unclaimedReported[key]; ok && s.at.Sub(last) < repeat {
			continue
		}
		w.unclaimedReported[key] = s.at
		w.cfg.Recorder.Eventf(u.pod, corev1.EventTypeWarning, gpushare.EventGPUMemoryUnclaimed,
			"Processes of this pod use %s of GPU memory on card %s, which none of its containers was granted: a container reached a card it was not handed (its own NVIDIA_VISIBLE_DEVICES, a privileged container or a mounted device)",
			usedString(u.used, u.unknown), u.card.UUID)
		klog.InfoS("Pod uses GPU memory on a card it holds nothing on", "pod", klog.KObj(u.pod), "card", u.card.UUID,
			"usedMiB", u.used>>20, "unknown", u.unknown)
	}
	for key := range w.unclaimedReported {
		if _, ok := s.unclaimed[key]; !ok && !s.podSeen[key.pod] {
			delete(w.unclaimedReported, key)
		}
	}
}

// usedString is a use in MiB for an event; a lower bound when NVML could not measure some
// processes.
func usedString(used uint64, unknown bool) string {
	mib := used >> 20
	if unknown {
		return "at least " + strconv.FormatUint(mib, 10) + " MiB (NVML cannot measure all its processes)"
	}
	return strconv.FormatUint(mib, 10) + " MiB"
}
