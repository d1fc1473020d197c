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
	seen    map[types.UID]struct{}
	cached  policy.Workload
	dirty   bool
}

func newShapeBook() *shapeBook { return &shapeBook{seen: map[types.UID]struct{}{}} }

// observe counts a pod the first time its uid is seen.
func (s *shapeBook) observe(uid types.UID, req gpushare.PodRequest, host policy.Host, c policy.Constraint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[uid]; ok {
		return
	}
	s.seen[uid] = struct{}{}
	s.counter.Add(req, host, c)
	s.dirty = true
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
