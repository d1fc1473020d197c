package schedulerplugin

import (
	"fmt"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// draIndex is what the scheduler's informers say of the gpushare driver: which
// ResourceSlices it has, and the allocated claims holding its devices, by pool (a pool is
// one node's). Event handlers keep it, so that a scheduling cycle reads the claims of the
// nodes it scores instead of listing every claim of the cluster, and a cluster without a
// gpushare ResourceSlice costs a pod nothing (hasSlices). Safe for concurrent use.
type draIndex struct {
	mu     sync.RWMutex
	slices map[string]struct{} // names of the driver's ResourceSlices (their content: ListWithDeviceTaintRules)
	// claims are the allocated claims with a result of the driver, pools the same by the
	// pools of those results.
	claims map[types.NamespacedName]*resourceapi.ResourceClaim
	pools  map[string]map[types.NamespacedName]*resourceapi.ResourceClaim
	// inFlight are the claims of pods Reserve passed whose allocation the informer has not
	// delivered yet: the scheduler's claim tracker holds it (assumed after PreBind's write,
	// or pending before it). Entries leave when the informer delivers an allocation or the
	// claim's deletion, or at Unreserve.
	inFlight map[types.NamespacedName]types.UID
	// versions are the pools' versions (heldClaims.version): the value of gen, a counter
	// that only grows, at the pool's last change; a pool without claims has none (0).
	versions map[string]uint64
	gen      uint64
	synced   []func() bool
}

// newDRAIndex registers the index's handlers on the ResourceSlice and ResourceClaim
// informers (the scheduler's shared ones). Errors: an informer refusing a handler.
func newDRAIndex(sliceInf, claimInf toolscache.SharedIndexInformer) (*draIndex, error) {
	x := &draIndex{
		slices:   map[string]struct{}{},
		claims:   map[types.NamespacedName]*resourceapi.ResourceClaim{},
		pools:    map[string]map[types.NamespacedName]*resourceapi.ResourceClaim{},
		inFlight: map[types.NamespacedName]types.UID{},
		versions: map[string]uint64{},
	}
	sreg, err := sliceInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    x.putSlice,
		UpdateFunc: func(_, obj any) { x.putSlice(obj) },
		DeleteFunc: x.deleteSlice,
	})
	if err != nil {
		return nil, fmt.Errorf("watching ResourceSlices: %w", err)
	}
	creg, err := claimInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    x.putClaim,
		UpdateFunc: func(_, obj any) { x.putClaim(obj) },
		DeleteFunc: x.deleteClaim,
	})
	if err != nil {
		return nil, fmt.Errorf("watching ResourceClaims: %w", err)
	}
	x.synced = []func() bool{sreg.HasSynced, creg.HasSynced}
	return x, nil
}

// ready reports whether the informers have delivered their first lists; until then the
// plugin reads the claims through the DRA manager.
func (x *draIndex) ready() bool {
	for _, s := range x.synced {
		if !s() {
			return false
		}
	}
	return true
}

// hasSlices reports whether the cluster has any ResourceSlice of the gpushare driver.
func (x *draIndex) hasSlices() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.slices) > 0
}

// untomb is the object a deletion event carries: the last known state behind a
// DeletedFinalStateUnknown.
func untomb(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

func (x *draIndex) putSlice(obj any) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if s.Spec.Driver == gpushare.DRADriverName {
		x.slices[s.Name] = struct{}{}
	} else {
		delete(x.slices, s.Name)
	}
}

func (x *draIndex) deleteSlice(obj any) {
	var name string
	switch s := untomb(obj).(type) {
	case *resourceapi.ResourceSlice:
		name = s.Name
	default:
		t, ok := obj.(toolscache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		name = t.Key // a cluster-scoped object's key is its name
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.slices, name)
}

// putClaim replaces what the index holds of the claim with obj: its results of the gpushare
// driver, by pool, when it is allocated.
func (x *draIndex) putClaim(obj any) {
	cl, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropClaimLocked(key)
	if cl.Status.Allocation == nil {
		return
	}
	delete(x.inFlight, key)
	for _, pool := range gpusharePools(cl.Status.Allocation) {
		m := x.pools[pool]
		if m == nil {
			m = map[types.NamespacedName]*resourceapi.ResourceClaim{}
			x.pools[pool] = m
		}
		m[key] = cl
		x.claims[key] = cl
		x.bumpLocked(pool)
	}
}

func (x *draIndex) deleteClaim(obj any) {
	var key types.NamespacedName
	switch cl := untomb(obj).(type) {
	case *resourceapi.ResourceClaim:
		key = types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}
	default:
		t, ok := obj.(toolscache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		ns, name, err := toolscache.SplitMetaNamespaceKey(t.Key)
		if err != nil {
			return
		}
		key = types.NamespacedName{Namespace: ns, Name: name}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.dropClaimLocked(key)
	delete(x.inFlight, key)
}

// dropClaimLocked removes the claim's results from the index. x.mu is held.
func (x *draIndex) dropClaimLocked(key types.NamespacedName) {
	old := x.claims[key]
	if old == nil {
		return
	}
	delete(x.claims, key)
	for _, pool := range gpusharePools(old.Status.Allocation) {
		if m := x.pools[pool]; m != nil {
			delete(m, key)
			if len(m) == 0 {
				delete(x.pools, pool)
				delete(x.versions, pool) // version 0: no claims
				continue
			}
		}
		x.bumpLocked(pool)
	}
}

// bumpLocked gives the pool a new version. x.mu is held.
func (x *draIndex) bumpLocked(pool string) {
	x.gen++
	x.versions[pool] = x.gen
}

// gpusharePools are the pools of a's results of the gpushare driver, each once.
func gpusharePools(a *resourceapi.AllocationResult) []string {
	if a == nil {
		return nil
	}
	var out []string
	for i := range a.Devices.Results {
		r := &a.Devices.Results[i]
		if r.Driver == gpushare.DRADriverName && !slices.Contains(out, r.Pool) {
			out = append(out, r.Pool)
		}
	}
	return out
}

// watch records the claims of a pod Reserve passed that the informer does not show
// allocated: until it does, the view reads their allocation from the tracker.
func (x *draIndex) watch(claims []types.NamespacedName, uids []types.UID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, key := range claims {
		if _, held := x.claims[key]; !held {
			x.inFlight[key] = uids[i]
		}
	}
}

// unwatch forgets the claims of a pod whose Reserve was undone.
func (x *draIndex) unwatch(claims []types.NamespacedName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, key := range claims {
		delete(x.inFlight, key)
	}
}

// read runs fn on the claims the informer shows allocated, under the index's read lock, and
// returns the in-flight claims (watch) it does not hold.
func (x *draIndex) read(fn func(heldClaims)) map[types.NamespacedName]types.UID {
	x.mu.RLock()
	defer x.mu.RUnlock()
	fn(heldClaims{x})
	if len(x.inFlight) == 0 {
		return nil
	}
	out := make(map[types.NamespacedName]types.UID, len(x.inFlight))
	for k, uid := range x.inFlight {
		if _, held := x.claims[k]; !held {
			out[k] = uid
		}
	}
	return out
}

// heldClaims is the index as draIndex.read's fn sees it.
type heldClaims struct{ x *draIndex }

// version is the pool's version: it changes whenever a claim with a result in the pool
// comes or goes.
func (h heldClaims) version(pool string) uint64 { return h.x.versions[pool] }

// charge charges the claims with results in pool name to p.
func (h heldClaims) charge(name string, p *draPool) {
	for _, cl := range h.x.pools[name] {
		chargePool(name, p, cl.Status.Allocation)
	}
}

// gpushareSlices is how many ResourceSlices of the driver there are.
func (h heldClaims) gpushareSlices() int { return len(h.x.slices) }
