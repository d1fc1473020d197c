package deviceplugin

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// grantState is what Allocate last answered for a pod.
type grantState string

const (
	// granted: Allocate served containers of the pod; the grant's alloc holds their cards.
	granted grantState = "Granted"
	// refused: Allocate refused one of the pod's containers. Kubelet then fails the pod's
	// admission for good, so the pod holds nothing whatever its annotations say. Serving the
	// pod again (a refusal that guessed the wrong pod without a PodResources answer) makes
	// it granted.
	refused grantState = "Refused"
)

// sighting is whether the pod view (the informer, or Allocate's view of the node's pods)
// has shown a grant's pod since the grant was made.
type sighting string

const (
	// unseen: only Allocate knows the pod (the LIST fallback found it, or the informer
	// lags); its absence from the view means nothing yet, so the grant counts until
	// forgetAfter after its last change.
	unseen sighting = "Unseen"
	// seen: the view has shown the pod; the grant counts while the view shows the pod live,
	// and goes as soon as the view drops it.
	seen sighting = "Seen"
)

// forgetAfter is how long an unseen grant is kept: long enough to outlast informer lag (a
// pod found by the LIST fallback may not be in the informer yet), short enough not to keep
// pods deleted before the informer saw them.
const forgetAfter = 10 * time.Minute

// grant is what this process handed one pod: the truth for the ledger while the pod lives,
// whatever its annotations say later or whether the informer has caught up. Not to be
// confused with the pod's allocation record (its annotations).
type grant struct {
	pod *corev1.Pod // last seen object (names, UID, which init containers are sidecars)
	// alloc is the cards of every container this plugin served and, for a pod it placed
	// itself, of every gpu-mem container (the others hold theirs already, before kubelet allocates them).
	alloc  gpushare.PodAllocation
	served map[gpushare.ContainerRef]bool
	state  grantState
	seen   sighting
	at     time.Time // last granted or refused
}

// keep reports whether the grant's pod may still hold its cards' memory, given the node's
// pods by UID.
func (g *grant) keep(byUID map[types.UID]*corev1.Pod, node string, now time.Time) bool {
	if pod, ok := byUID[g.pod.UID]; ok {
		return holdsMemory(pod, node)
	}
	return g.seen == unseen && now.Sub(g.at) <= forgetAfter
}

// copy is a deep copy of the grant (the pod object is shared: nobody changes it).
func (g *grant) copy() *grant {
	c := *g
	c.alloc = mergeAllocation(gpushare.PodAllocation{}, g.alloc)
	c.served = make(map[gpushare.ContainerRef]bool, len(g.served))
	for ref := range g.served {
		c.served[ref] = true
	}
	return &c
}

// ledger is share-plugin's ledger of the node's pods it served, by pod UID. One mutex
// guards it; readers take a snapshot and decide on that.
type ledger struct {
	node  string
	clock clock.PassiveClock
	// released is told, outside the lock, the UID of each pod whose grant the ledger drops
	// (the pod is gone or finished) and of each pod the informer deletes; nil: nobody is.
	released func(types.UID)

	mu     sync.Mutex
	grants map[types.UID]*grant
}

func newLedger(node string, clk clock.PassiveClock, released func(types.UID)) *ledger {
	return &ledger{node: node, clock: clk, released: released, grants: map[types.UID]*grant{}}
}

// release tells l.released of the pods whose grants were dropped. Not under l.mu: the
// callback may do file I/O.
func (l *ledger) release(uids ...types.UID) {
	if l.released == nil {
		return
	}
	for _, uid := range uids {
		l.released(uid)
	}
}

// holdsMemory reports a pod on node whose containers may hold GPU memory: bound there and
// not finished (Succeeded or Failed), whatever its deletionTimestamp. A terminating pod's
// containers keep running, and their memory, for the whole grace period; only the pod
// object's deletion or a terminal phase says they are gone.
func holdsMemory(pod *corev1.Pod, node string) bool {
	return pod.Spec.NodeName == node &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

func podsByUID(pods []*corev1.Pod) map[types.UID]*corev1.Pod {
	out := make(map[types.UID]*corev1.Pod, len(pods))
	for _, pod := range pods {
		out[pod.UID] = pod
	}
	return out
}

// sync drops the grants of pods that are gone or terminal, refreshes the rest from pods
// (the node's pods) and returns the ledger as it then stands.
func (l *ledger) sync(pods []*corev1.Pod) snapshot {
	byUID := podsByUID(pods)
	now := l.clock.Now()
	var dropped []types.UID
	defer func() { l.release(dropped...) }()
	l.mu.Lock()
	defer l.mu.Unlock()
	for uid, g := range l.grants {
		if !g.keep(byUID, l.node, now) {
			delete(l.grants, uid)
			dropped = append(dropped, uid)
			continue
		}
		if pod, ok := byUID[uid]; ok {
			g.pod, g.seen = pod, seen
		}
	}
	return l.snapshotLocked()
}

// snapshot returns a copy of every grant, kept or not (see grant.keep).
func (l *ledger) snapshot() snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.snapshotLocked()
}

func (l *ledger) snapshotLocked() snapshot {
	out := make(snapshot, len(l.grants))
	for uid, g := range l.grants {
		out[uid] = g.copy()
	}
	return out
}

// podSeen marks the grant of a pod the informer shows as seen (its later absence then
// means it is gone, see grant.keep), and drops it once the pod is terminal.
func (l *ledger) podSeen(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	l.mu.Lock()
	g := l.grants[pod.UID]
	switch {
	case g == nil:
	case !holdsMemory(pod, l.node):
		delete(l.grants, pod.UID)
		l.mu.Unlock()
		l.release(pod.UID)
		return
	default:
		g.pod, g.seen = pod, seen
	}
	l.mu.Unlock()
}

// podGone drops the grant of a pod the informer deleted (a tombstone too) and tells
// l.released.
func (l *ledger) podGone(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	l.mu.Lock()
	delete(l.grants, pod.UID)
	l.mu.Unlock()
	// Also without a grant: a pod an earlier process served may not have been adopted.
	l.release(pod.UID)
}

// grantContainers remembers that containers refs of pod were served, and alloc, the pod's
// allocation.
// shown: the informer holds the pod, so its later absence from the view means it is gone,
// not that the informer lags (see grant.keep).
func (l *ledger) grantContainers(pod *corev1.Pod, alloc gpushare.PodAllocation, shown bool, refs ...gpushare.ContainerRef) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.entry(pod.UID)
	g.pod, g.alloc, g.state, g.at = pod, alloc, granted, l.clock.Now()
	for _, ref := range refs {
		g.served[ref] = true
	}
	if shown {
		g.seen = seen
	}
}

// refuse remembers that the pod's admission fails (see refused).
func (l *ledger) refuse(pod *corev1.Pod) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.entry(pod.UID)
	g.pod, g.state, g.at = pod, refused, l.clock.Now()
}

// entry returns the pod's grant, made empty (granted nothing, unseen) when there is none.
// Caller holds l.mu.
func (l *ledger) entry(uid types.UID) *grant {
	g := l.grants[uid]
	if g == nil {
		g = &grant{served: map[gpushare.ContainerRef]bool{}, state: granted, seen: unseen}
		l.grants[uid] = g
	}
	return g
}

// snapshot is the ledger at one instant, by pod UID: what one Allocate, one preferred
// allocation, one /served report or one watchdog sample reads.
type snapshot map[types.UID]*grant

// refused reports whether Allocate refused the pod.
func (s snapshot) refused(uid types.UID) bool {
	g := s[uid]
	return g != nil && g.state == refused
}

// served returns the containers of the pod this process served.
func (s snapshot) served(uid types.UID) map[gpushare.ContainerRef]bool {
	out := map[gpushare.ContainerRef]bool{}
	if g := s[uid]; g != nil {
		for ref := range g.served {
			out[ref] = true
		}
	}
	return out
}

// granted returns a copy of the allocation granted to the pod (zero when none).
func (s snapshot) granted(uid types.UID) gpushare.PodAllocation {
	var out gpushare.PodAllocation
	if g := s[uid]; g != nil {
		out = mergeAllocation(out, g.alloc)
	}
	return out
}

// mergeAllocation returns base with every container of over set to over's cards.
func mergeAllocation(base, over gpushare.PodAllocation) gpushare.PodAllocation {
	var out gpushare.PodAllocation
	for _, src := range []gpushare.PodAllocation{base, over} {
		for i, cu := range src.App {
			out.Set(gpushare.ContainerRef{Index: i}, copyUnits(cu))
		}
		for i, cu := range src.Init {
			out.Set(gpushare.ContainerRef{InitList: true, Index: i}, copyUnits(cu))
		}
	}
	return out
}

func copyUnits(cu gpushare.CardUnits) gpushare.CardUnits {
	out := make(gpushare.CardUnits, len(cu))
	for c, u := range cu {
		out[c] = u
	}
	return out
}
