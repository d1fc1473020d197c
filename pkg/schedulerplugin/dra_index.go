package schedulerplugin

import (
	"fmt"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

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
	if s, ok := untomb(obj).(*resourceapi.ResourceSlice); ok {
		x.mu.Lock()
		delete(x.slices, s.Name)
		x.mu.Unlock()
	}
	if key, ok := obj.(toolscache.DeletedFinalStateUnknown); ok && key.Obj == nil {
		x.mu.Lock()
		delete(x.slices, key.Key)
		x.mu.Unlock()
	}
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
			}
		}
	}
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

// charge charges to v the allocated claims with results in pools (the view's pools, by
// name): those the informer holds, and the in-flight ones (watch) as the tracker holds
// them, assumed or pending. Errors: the tracker failing.
func (x *draIndex) charge(v *draView, pools map[string]*draPool, tracker fwk.ResourceClaimTracker) error {
	inFlight := x.chargeHeld(v, pools)
	for key, uid := range inFlight {
		cl, err := tracker.Get(key.Namespace, key.Name)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("reading claim %s: %w", key, err)
		}
		a := cl.Status.Allocation
		if cl.UID != uid || a == nil {
			a = tracker.GetPendingAllocation(uid)
		}
		if a != nil {
			v.chargeAllocation(pools, a)
		}
	}
	return nil
}

// chargeHeld charges the claims the informer shows allocated and returns a copy of the
// in-flight ones, all under one read lock.
func (x *draIndex) chargeHeld(v *draView, pools map[string]*draPool) map[types.NamespacedName]types.UID {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for name, p := range pools {
		for _, cl := range x.pools[name] {
			v.chargePool(name, p, cl.Status.Allocation)
		}
	}
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
