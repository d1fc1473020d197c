package cache

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// shapeBook learns the workload from every pod the cache sees, each counted once per uid.
type shapeBook struct {
	mu      sync.Mutex
	counter policy.ShapeCounter
	seen    map[types.UID]seenShape
	cached  policy.Workload
	dirty   bool
}

// seenShape is how a pod was counted: its host request and constraint, and whether its
// gpu-mem request was zero (a pod whose GPU ask is in DRA claims, until observeClaims).
type seenShape struct {
	host     policy.Host
	cons     policy.Constraint
	noGPU    bool
	byClaims bool // counted again by observeClaims: the shape is final
}

func newShapeBook() *shapeBook { return &shapeBook{seen: map[types.UID]seenShape{}} }

// observe counts a pod the first time its uid is seen.
func (s *shapeBook) observe(uid types.UID, req gpushare.PodRequest, host policy.Host, c policy.Constraint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[uid]; ok {
		return
	}
	s.seen[uid] = seenShape{host: host, cons: c, noGPU: req.IsZero()}
	s.counter.Add(req, host, c)
	s.dirty = true
}

// observeClaims counts, once per uid, the GPU shape a pod asks through DRA claims (req, in
// units): the pod was counted without GPU when its object was seen, so that count moves to
// req. A uid not seen yet is counted with req, host and no constraint; one seen with
// gpu-mem keeps its count. It reports whether the workload changed.
func (s *shapeBook) observeClaims(uid types.UID, req gpushare.PodRequest, host policy.Host) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, ok := s.seen[uid]
	switch {
	case seen.byClaims || (ok && !seen.noGPU) || req.IsZero():
		return false
	case ok:
		s.counter.Remove(gpushare.PodRequest{}, seen.host, seen.cons)
	default:
		seen.host = host
	}
	seen.byClaims = true
	s.seen[uid] = seen
	s.counter.Add(req, seen.host, seen.cons)
	s.dirty = true
	return true
}

// forget drops a deleted uid from the seen set (uids never come back); the pod stays counted.
func (s *shapeBook) forget(uid types.UID) {
	s.mu.Lock()
	delete(s.seen, uid)
	s.mu.Unlock()
}

// workload returns the current typical shapes, recomputed only after new pods were seen.
// The slice is shared and must not be modified.
func (s *shapeBook) workload() policy.Workload {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirty {
		s.cached = s.counter.Workload(policy.WorkloadCoverage, policy.WorkloadMaxShapes)
		s.dirty = false
	}
	return s.cached
}
