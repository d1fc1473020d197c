package schedulerplugin

import (
	"fmt"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// readIndexedView is newDRAView over slices sl with the claims of index x (the informer's,
// and the in-flight ones as tracker holds them): the same cards and charges, read per
// scored pool. A node of one pool whose slice objects and claims (the pool's version) are
// those of an earlier cycle reuses that cycle's cards from nodes, without reading them
// again. Errors: the tracker failing.
func readIndexedView(x *draIndex, nodes *draNodeMemo, devices *sliceMemo, sl []*resourceapi.ResourceSlice, want map[string]bool, tracker fwk.ResourceClaimTracker) (*draView, error) {
	b := &viewBuild{
		v:       &draView{nodes: map[string]*draNode{}},
		pools:   map[string]*draPool{},
		memoed:  map[string]*draPoolMemo{},
		devices: devices,
	}
	newest := gpushare.DRANewestPools(sl, wantNode(want))
	var total int
	inFlight := x.read(func(h heldClaims) {
		b.fromIndex(h, nodes, newest)
		total = h.gpushareSlices()
	})
	for key, uid := range inFlight {
		cl, err := tracker.Get(key.Namespace, key.Name)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading claim %s: %w", key, err)
		}
		a := cl.Status.Allocation
		if cl.UID != uid || a == nil {
			a = tracker.GetPendingAllocation(uid)
		}
		if a != nil {
			b.chargeInFlight(a)
		}
	}
	finished := map[*draNode]bool{}
	for _, p := range b.pools {
		if !finished[p.node] {
			p.node.finish()
			finished[p.node] = true
		}
	}
	nodes.prune(total)
	devices.prune(sl)
	return b.v, nil
}

// viewBuild is one readIndexedView under way: the view, the pools read or copied in this
// cycle (their nodes not yet finished), and the pools whose finished node comes from the
// memo (shared: never modified).
type viewBuild struct {
	v       *draView
	pools   map[string]*draPool
	memoed  map[string]*draPoolMemo
	devices *sliceMemo
}

// fromIndex puts the newest pools' nodes in the view, charged with the claims h holds:
// from nodes where they are unchanged, else read and kept there. A node of several pools
// is read afresh each cycle.
func (b *viewBuild) fromIndex(h heldClaims, nodes *draNodeMemo, newest map[string][]*resourceapi.ResourceSlice) {
	perNode := make(map[string]int, len(newest))
	for _, ss := range newest {
		perNode[*ss[0].Spec.NodeName]++
	}
	for name, ss := range newest {
		node := *ss[0].Spec.NodeName
		if perNode[node] > 1 {
			p := readDRAPool(b.v.node(node), ss, b.devices)
			h.charge(name, p)
			b.pools[name] = p
			continue
		}
		ver := h.version(name)
		e := nodes.get(name, ss, ver)
		if e == nil {
			p := readDRAPool(&draNode{}, ss, b.devices)
			h.charge(name, p)
			done := p.node.clone()
			done.finish()
			e = &draPoolMemo{node: node, slices: ss, version: ver, pool: p, done: done}
			nodes.put(name, e)
		}
		b.v.nodes[node] = e.done
		b.memoed[name] = e
	}
}

// chargeInFlight charges a's results of the gpushare driver in the view's pools; a pool
// whose node is shared from the memo is charged on a copy.
func (b *viewBuild) chargeInFlight(a *resourceapi.AllocationResult) {
	for i := range a.Devices.Results {
		r := &a.Devices.Results[i]
		if r.Driver != gpushare.DRADriverName {
			continue
		}
		p := b.pools[r.Pool]
		if e := b.memoed[r.Pool]; p == nil && e != nil {
			n := e.pool.node.clone()
			p = &draPool{node: n, devices: e.pool.devices, cards: e.pool.cards}
			b.pools[r.Pool] = p
			b.v.nodes[e.node] = n
			delete(b.memoed, r.Pool)
		}
		if p != nil {
			chargeResult(p, r)
		}
	}
}

// draNodeMemo keeps, by pool name, each single-pool node as readIndexedView read and charged
// it, with what it was built from. Safe for concurrent use.
type draNodeMemo struct {
	mu sync.Mutex
	m  map[string]*draPoolMemo
}

// draPoolMemo is one pool's node: built from slices (the pool's newest slice objects, in
// gpushare.DRANewestPools order) and the claims of version; pool is its cards before
// finish (for a copy charged with in-flight claims), done the same finished.
type draPoolMemo struct {
	node    string
	slices  []*resourceapi.ResourceSlice
	version uint64
	pool    *draPool
	done    *draNode
}

// get is the pool's entry if it was built from these slices and this version; nil else.
func (m *draNodeMemo) get(name string, ss []*resourceapi.ResourceSlice, version uint64) *draPoolMemo {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.m[name]
	if e == nil || e.version != version || !slices.Equal(e.slices, ss) {
		return nil
	}
	return e
}

func (m *draNodeMemo) put(name string, e *draPoolMemo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string]*draPoolMemo{}
	}
	m.m[name] = e
}

// prune forgets every entry once the memo holds more than twice live (the gpushare
// slices there are, about one a pool) plus a margin: pools of nodes gone do not pile up.
func (m *draNodeMemo) prune(live int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) > 2*live+64 {
		m.m = nil
	}
}
