package watchdog

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cgroups"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// usageKey is one container on one card.
type usageKey struct {
	pod       types.UID
	container string
	card      int // NVML index
}

// ctrUsage is what one container holds and uses on one card in a sample.
type ctrUsage struct {
	pod       *corev1.Pod
	container string
	card      gpushare.Device
	granted   uint64 // bytes: units on the card × the memory unit
	used      uint64 // bytes: the sum of its processes' known use
	unknown   bool   // NVML could not tell the use of some of its processes
	// smPercent is the sum of its processes' SM utilisation on the card, in percent (may
	// pass 100); meaningful only when the sample's utilRead holds the card.
	smPercent uint64
}

// over reports whether the container uses more than its grant plus threshold (a fraction):
// used > granted × (1 + threshold). A container without a grant on the card (0) is over as
// soon as it uses any memory there.
func (u *ctrUsage) over(threshold float64) bool {
	return float64(u.used) > float64(u.granted)*(1+threshold)
}

// usageSample is one listing of every card's processes, attributed to the containers of
// the node's GPU-sharing pods.
type usageSample struct {
	at   time.Time
	ctrs map[usageKey]*ctrUsage
	// unattributed is, per card index, the bytes of processes that belong to no container
	// of a pod holding a grant on this node.
	unattributed map[int]uint64
	// listed holds the cards whose processes NVML listed; a card that failed has no
	// usage figures in this sample.
	listed map[int]bool
	// utilRead holds the cards whose per-process utilisation NVML reported in this sample
	// (never on an MPS node): only their containers have SM utilisation figures.
	utilRead map[int]bool
	// unclaimed is, per pod and card, what the processes of a pod of the node (outside
	// Unclaimed.ExemptNamespaces) use on a card the pod holds nothing on.
	unclaimed map[podCard]*unclaimedUsage
	// podSeen holds the UIDs of the pods of the node's pod view at the sample.
	podSeen map[types.UID]bool
	// escapes are the processes that bypass MPS on the cards of a node labelled
	// gpushare.io/isolation=mps (empty on other nodes): per container and card for a pod's,
	// per process and card for others.
	escapes map[escapeKey]*escape
	// mpsServers is, per card index on an MPS node, the bytes its MPS servers use: the
	// daemons' overhead, outside every grant.
	mpsServers map[int]uint64
	// mps is whether the node was an MPS node at the sample.
	mps bool
}

// sample lists the processes of every card and charges each to its container: through
// /proc/<pid>/cgroup to the pod UID and container ID, through the ledger's pods to the pod
// and the container's name. Every container of a GPU-sharing pod of the node (one whose
// allocation names a card; terminating ones too) is in the sample with its grant on each of its
// cards, whether it runs processes or not; a container of such a pod using memory on a card
// it holds nothing on is in it with grant 0. Processes of other pods, of the host, or that
// cannot be mapped are unattributed. Besides, the use of every pod of the node on a card
// the pod holds nothing on (none of its containers has units there, or it requested no
// gpu-mem) is charged to the pod as use without a grant (GPUMemoryUnclaimed), when its cgroup
// names the pod. Off an MPS node, with Config.Utilization set, each container's processes'
// SM utilisation on the card is charged to it too (addUtilization).
func (w *Watchdog) sample(mps bool) usageSample {
	s := usageSample{at: w.cfg.Clock.Now(), ctrs: map[usageKey]*ctrUsage{}, unattributed: map[int]uint64{}, listed: map[int]bool{}, utilRead: map[int]bool{},
		unclaimed: map[podCard]*unclaimedUsage{}, podSeen: map[types.UID]bool{}, escapes: map[escapeKey]*escape{}, mpsServers: map[int]uint64{}, mps: mps}
	pods, all, holds := w.grants(&s)
	for _, card := range w.cfg.Cards {
		procs, err := w.cfg.Processes(card.Index)
		if err != nil {
			w.nvmlFailed(card.Index, err)
			continue
		}
		w.nvmlAnswered(card.Index)
		s.listed[card.Index] = true
		owners := map[uint32]usageKey{} // the container each PID is charged to
		for _, pr := range procs {
			pod, name, origin := w.attribute(pr.PID, all)
			if mps {
				w.checkMPS(&s, card, pr, pod, name, origin)
			}
			if pod != nil && !holds[podCard{pod.UID, card.Index}] && !w.exempt[pod.Namespace] {
				s.addUnclaimed(pod, card, pr)
			}
			if pod == nil || pods[pod.UID] == nil || name == "" {
				s.unattributed[card.Index] += pr.UsedBytes // 0 when unknown
				continue
			}
			key := usageKey{pod.UID, name, card.Index}
			u := s.ctrs[key]
			if u == nil {
				u = &ctrUsage{pod: pod, container: name, card: card}
				s.ctrs[key] = u
			}
			u.used += pr.UsedBytes
			u.unknown = u.unknown || !pr.UsedKnown
			owners[pr.PID] = key
		}
		if !mps && w.cfg.Utilization != nil {
			w.addUtilization(&s, card, owners)
		}
	}
	return s
}

// grants puts every container of the node's GPU-sharing pods in the sample with its grant on
// each of its cards, and returns those pods (by UID), every pod of the node, and the cards
// each GPU-sharing pod holds units on.
func (w *Watchdog) grants(s *usageSample) (pods, all map[types.UID]*corev1.Pod, holds map[podCard]bool) {
	pods = map[types.UID]*corev1.Pod{} // GPU-sharing pods
	all = map[types.UID]*corev1.Pod{}  // every pod of the node
	holds = map[podCard]bool{}         // a card a GPU-sharing pod holds units on
	unitBytes := uint64(w.cfg.Unit.MiB) << 20
	for _, pc := range w.ledger.Grants() {
		pod, grant := pc.Pod, pc.Grant
		// Terminating pods still run their processes: they are charged (not unattributed)
		// but not judged (judge).
		if pod.Spec.NodeName != w.cfg.NodeName || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		all[pod.UID] = pod
		s.podSeen[pod.UID] = true
		if len(grant.Cards()) == 0 {
			continue
		}
		pods[pod.UID] = pod
		for _, idx := range grant.Cards() {
			holds[podCard{pod.UID, idx}] = true
		}
		for _, al := range []struct {
			init bool
			a    gpushare.Allocation
		}{{false, grant.App}, {true, grant.Init}} {
			for i, cu := range al.a {
				name := containerName(pod, gpushare.ContainerRef{InitList: al.init, Index: i})
				for idx, units := range cu {
					card, ok := w.byIndex[idx]
					if !ok || name == "" || units <= 0 {
						continue
					}
					s.ctrs[usageKey{pod.UID, name, idx}] = &ctrUsage{pod: pod, container: name, card: card, granted: uint64(units) * unitBytes}
				}
			}
		}
	}
	return pods, all, holds
}

// Where a process NVML lists runs, as attribute tells it.
const (
	originPod     = "pod"     // in a pod of the node's pod view
	originHost    = "host"    // outside every pod: its cgroup is not under kubepods
	originUnknown = "unknown" // its cgroup cannot be read, or names a pod the pod view lacks
)

// attribute returns the pod (among pods, by UID) and container name process pid runs in, and
// where it runs (originPod, originHost, originUnknown); the pod is nil unless originPod, the
// name "" when its container is not in the pod's status yet.
func (w *Watchdog) attribute(pid uint32, pods map[types.UID]*corev1.Pod) (*corev1.Pod, string, string) {
	c, err := w.procs.Lookup(pid)
	switch {
	case errors.Is(err, cgroups.ErrNoProcess):
		if !w.warnedNoProc {
			w.warnedNoProc = true
			klog.ErrorS(err, "A process NVML lists is not under the proc root: share-plugin must run in the host's PID namespace (hostPID: true) for the usage watchdog to attribute GPU memory to pods; such processes count as unattributed", "pid", pid, "procRoot", w.procs.ProcRoot)
		}
		return nil, "", originUnknown
	case err != nil:
		klog.V(2).InfoS("Cannot tell the pod of a GPU process; counted as unattributed", "pid", pid, "err", err)
		return nil, "", originUnknown
	case !c.InPod():
		return nil, "", originHost
	}
	pod := pods[types.UID(c.PodUID)]
	if pod == nil {
		return nil, "", originUnknown
	}
	name := containerByID(pod, c.ID)
	if name == "" {
		klog.V(2).InfoS("GPU process of a pod in no container its status lists yet; counted as unattributed", "pod", klog.KObj(pod), "pid", pid, "containerID", c.ID)
	}
	return pod, name, originPod
}

// containerByID returns the name of the pod's container (app, init or ephemeral) whose
// status carries runtime ID id ("" when none does).
func containerByID(pod *corev1.Pod, id string) string {
	if id == "" {
		return ""
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if cgroups.StatusID(cs.ContainerID) == id {
				return cs.Name
			}
		}
	}
	return ""
}

// containerName is the name of the container ref names in the pod's spec ("" when none).
func containerName(pod *corev1.Pod, ref gpushare.ContainerRef) string {
	list := pod.Spec.Containers
	if ref.InitList {
		list = pod.Spec.InitContainers
	}
	if ref.Index < 0 || ref.Index >= len(list) {
		return ""
	}
	return list[ref.Index].Name
}

// usageAnnotation is the sample as the node annotation publishes it: every card, its pods
// by namespace and name, their containers by name; MiB rounded down.
func (s usageSample) usageAnnotation(cards []gpushare.Device) gpushare.Usage {
	out := gpushare.Usage{Version: gpushare.UsageVersion, Time: s.at.UTC().Truncate(time.Second), Cards: make([]gpushare.CardUsage, 0, len(cards))}
	type podKey struct {
		ns, name string
		uid      types.UID
	}
	for _, c := range cards {
		cu := gpushare.CardUsage{Index: c.Index, UUID: c.UUID, UnattributedMiB: int64(s.unattributed[c.Index] >> 20)}
		byPod := map[podKey][]gpushare.ContainerUsage{}
		for k, u := range s.ctrs {
			if k.card != c.Index {
				continue
			}
			pk := podKey{u.pod.Namespace, u.pod.Name, u.pod.UID}
			byPod[pk] = append(byPod[pk], gpushare.ContainerUsage{Name: u.container, UsedMiB: int64(u.used >> 20), Unknown: u.unknown})
		}
		keys := slices.SortedFunc(maps.Keys(byPod), func(a, b podKey) int {
			if c := strings.Compare(a.ns, b.ns); c != 0 {
				return c
			}
			if c := strings.Compare(a.name, b.name); c != 0 {
				return c
			}
			return strings.Compare(string(a.uid), string(b.uid))
		})
		for _, pk := range keys {
			ctrs := byPod[pk]
			slices.SortFunc(ctrs, func(a, b gpushare.ContainerUsage) int { return strings.Compare(a.Name, b.Name) })
			cu.Pods = append(cu.Pods, gpushare.PodUsage{Namespace: pk.ns, Name: pk.name, UID: pk.uid, Containers: ctrs})
		}
		out.Cards = append(out.Cards, cu)
	}
	return out
}

// usageChanged reports whether b differs from a by at least unitMiB on some entry, or in
// which entries there are (time aside).
func usageChanged(a, b gpushare.Usage, unitMiB int64) bool {
	if len(a.Cards) != len(b.Cards) {
		return true
	}
	far := func(x, y int64) bool { return x-y >= unitMiB || y-x >= unitMiB }
	for i := range a.Cards {
		ca, cb := a.Cards[i], b.Cards[i]
		if ca.Index != cb.Index || ca.UUID != cb.UUID || far(ca.UnattributedMiB, cb.UnattributedMiB) || len(ca.Pods) != len(cb.Pods) {
			return true
		}
		for j := range ca.Pods {
			pa, pb := ca.Pods[j], cb.Pods[j]
			if pa.UID != pb.UID || pa.Namespace != pb.Namespace || pa.Name != pb.Name || len(pa.Containers) != len(pb.Containers) {
				return true
			}
			for k := range pa.Containers {
				xa, xb := pa.Containers[k], pb.Containers[k]
				if xa.Name != xb.Name || xa.Unknown != xb.Unknown || far(xa.UsedMiB, xb.UsedMiB) {
					return true
				}
			}
		}
	}
	return false
}
