package schedulerplugin

import (
	"context"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/policy"
)

// narrowNodes is how many nodes PreFilter leaves a pod under a packing policy (fgd,
// binpack): the best-rated of those whose cards can hold its gpu-mem (narrowMem) or its
// claims (narrowDRA). The other plugins' Filter and Score (for a claim pod DynamicResources'
// allocator, the costly part) then run on these few instead of on every node until
// kube-scheduler has found enough feasible ones; a few spares leave room for a node being
// refused for what GPUShare does not read (CPU, taints, affinity, CEL selectors) and give the
// other score plugins a say among the nodes the policy rates best.
const narrowNodes = 32

// narrowChecks bounds how many of the best-rated nodes narrowMem and narrowDRA read against
// the pod's other constraints (admission.admits) before they keep what they found.
const narrowChecks = 8 * narrowNodes

// narrowDRA is, for a pod without gpu-mem whose gpushare claims ask memory, the nodes its
// Filter should run on: those whose DRA cards hold the claims where kube-scheduler's
// allocator will put them (draRater), and under fgd or binpack only the narrowNodes
// best-rated of them that pass admission's reading of kube-scheduler's commonest filters,
// as narrowMem keeps. It rates a window of GPUShareArgs.ClaimNodesToRate nodes (rating is
// most of its cost), from a start that rotates from pod to pod as kube-scheduler's does,
// and every node when none there holds the claims. It reads the pod's claims and the DRA
// nodes into s.dra, which PreScore then reuses. nil (every node) when there is nothing to
// narrow: narrowing turned off (GPUShareArgs.ClaimNarrowing), no such claims, a pod with
// constraints GPUShare does not read (narrowable), the claim index not synced yet, no node
// that holds them (the allocator then gives every node's
// reason), or a pod narrowed before that was not placed since (its retry sees every node,
// so that a node set the allocator refuses cannot hold it back). Errors: the DRA manager's
// listers or tracker failing.
func (p *Plugin) narrowDRA(ctx context.Context, s *cycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, error) {
	if p.narrowScan < 0 || p.draIndex == nil || len(pod.Spec.ResourceClaims) == 0 || !narrowable(pod) || !p.draIndex.ready() || p.narrowed.has(pod.UID) {
		return nil, nil
	}
	window := nodes
	if n := p.narrowScan; n > 0 && len(nodes) > n {
		start := int((p.narrowNext.Add(uint64(n)) - uint64(n)) % uint64(len(nodes)))
		window = make([]fwk.NodeInfo, 0, n)
		for i := range n {
			window = append(window, nodes[(start+i)%len(nodes)])
		}
	}
	names, asks, err := p.narrowIn(ctx, s, pod, window)
	if err == nil && asks && len(names) == 0 && len(window) < len(nodes) {
		names, _, err = p.narrowIn(ctx, s, pod, nodes)
	}
	if err != nil || len(names) == 0 {
		s.dra = nil // PreScore reads afresh
		return nil, err
	}
	p.narrowed.add(pod.UID)
	s.narrowed = true
	p.narrowings.WithLabelValues(narrowedClaims, outcomeNarrowed).Inc()
	return &fwk.PreFilterResult{NodeNames: sets.New(names...)}, nil
}

// narrowIn is narrowDRA's choice among nodes: nil when none of them holds the claims; asks
// is false when the pod has no claims that ask memory (nothing to narrow for).
func (p *Plugin) narrowIn(ctx context.Context, s *cycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (names []string, asks bool, err error) {
	d, err := p.readDRAScoring(pod, nodes)
	if err != nil || d == nil {
		return nil, false, err
	}
	s.dra = d
	p.learnClaimShape(s, pod, nodes)
	r := p.rate(ctx, s, pod, nodes)
	defer r.release(&p.rates)
	if !policy.Packs(p.pol.Name()) {
		return r.best(0), true, nil // every fitting node
	}
	adm := newAdmission(klog.FromContext(ctx), pod)
	return r.bestAdmitted(narrowNodes, narrowChecks, func(i int) bool { return adm.admits(nodes[i]) }), true, nil
}

// best are the names of the fitting nodes, the n best-rated of them (0: all).
func (r *nodeRates) best(n int) []string {
	idx := r.fitting(n > 0)
	if n > 0 {
		idx = idx[:min(n, len(idx))]
	}
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = r.names[j]
	}
	return out
}

// fitting are the indexes of the fitting nodes: best-rated first (ties in list order) when
// sorted, else in list order. The slice is r's buffer: valid until the next call or release.
func (r *nodeRates) fitting(sorted bool) []int {
	idx := r.idx[:0]
	for i, fit := range r.fits {
		if fit {
			idx = append(idx, i)
		}
	}
	r.idx = idx
	if sorted {
		slices.SortStableFunc(idx, func(a, b int) int {
			switch {
			case r.rates[a] > r.rates[b]:
				return -1
			case r.rates[a] < r.rates[b]:
				return 1
			}
			return 0
		})
	}
	return idx
}

// narrowedPods are the pods narrowDRA narrowed and Reserve has not placed since. Safe for
// concurrent use. Pods deleted while pending are never taken out: the set is cleared once
// it holds maxNarrowed, which at worst lets a narrowed pod be narrowed once more.
type narrowedPods struct {
	mu sync.Mutex
	m  map[types.UID]struct{}
}

// maxNarrowed bounds narrowedPods.
const maxNarrowed = 1 << 14

func (n *narrowedPods) has(uid types.UID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.m[uid]
	return ok
}

func (n *narrowedPods) add(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil || len(n.m) >= maxNarrowed {
		n.m = map[types.UID]struct{}{}
	}
	n.m[uid] = struct{}{}
}

func (n *narrowedPods) forget(uid types.UID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, uid)
}
