package policy

// scratch is the working memory of placing and scoring one pod on one node. Per-card buffers
// are indexed by card position (0..len(node.Cards)-1, the order of node.Cards), never by NVML
// card index. A Scorer keeps one and reuses it node after node, so scoring allocates nothing
// once the buffers have grown to the largest node; Place uses a fresh one per call.
type scratch struct {
	free     []int64 // units each card still offers a container (Card.Free, less what was taken)
	held     []int64 // units the pod holds on each card so far
	sidecars []int64 // the part of held that sidecar containers hold
	cand     []int   // positions that can take the container being placed
	// order lists req.Containers indexes in placement order: app and sidecar containers
	// largest per-card need first (stable), then init containers in spec order.
	order []int
	// chosen holds the positions each container took, in order: order[0]'s Cards positions
	// first, then order[1]'s, and so on.
	chosen []int
	failed int // after fill returned false: the req.Containers index that found too few cards

	work   []int64     // fgd's card choice: free units while trying each candidate
	picked []int       // fgd's card choice: positions picked for the current container
	before []int64     // fgd's score: free units per card before the placement
	after  []int64     // fgd's score: free units per card after the placement
	tried  []triedCard // fgd's card choice: the candidate values of the current round
	stats  []cardStat  // fgd's frag: per card shape
	// caps are fgd's host caps per shape for the last hosts seen (fgd.caps), used round
	// robin: a node's score needs the host before and after the placement.
	caps     [2]capsEntry
	nextCaps int
	// need is fgd's podsToUse for needBound under the workload whose first shape is needW.
	need      []int64
	needBound []int64
	needW     *Shape
}

// capsEntry is fgd.caps of one host under one workload (identified by its first shape).
type capsEntry struct {
	valid bool
	host  Host
	bound []int64
	w     *Shape
	caps  []int64
}

// forget drops what the buffers remember of earlier nodes under a workload (fgd's host
// caps and podsToUse), keeping their arrays: a Scorer taken from a ScorerPool scores as a
// new one does, and one lying in the pool keeps no workload alive.
func (s *scratch) forget() {
	for i := range s.caps {
		s.caps[i].valid, s.caps[i].w = false, nil
	}
	s.nextCaps, s.needW = 0, nil
}

// resize returns buf with length n, reusing its array when it is large enough; the contents
// are whatever was there (callers overwrite every element).
func resize[T int | int64](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// insertionSort sorts p by less, stably: it orders a pod's few containers, and unlike
// sort.SliceStable it allocates nothing.
func insertionSort(p []int, less func(a, b int) bool) {
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && less(p[j], p[j-1]); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}

// selectFirst moves the k best card positions of p by less to its front, best first, and
// returns them: a partial selection sort, about k·len(p) comparisons (k is usually 1) and no
// allocation. less must be a total order (the card orders break ties on the distinct NVML
// index): then the result is the first k of p sorted, whatever p's order.
func selectFirst(p []int, k int, less func(a, b int) bool) []int {
	for j := 0; j < k; j++ {
		m := j
		for i := j + 1; i < len(p); i++ {
			if less(p[i], p[m]) {
				m = i
			}
		}
		p[j], p[m] = p[m], p[j]
	}
	return p[:k]
}
