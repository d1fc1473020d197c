package policy

import (
	"sort"
	"strconv"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// prefer reports whether card a is a better choice than card b for a container that needs
// `need` units on it; free is each card's free units at that moment.
type prefer func(a, b Card, freeA, freeB, need int64) bool

// chooser picks k of the candidate card positions (indexes into node.Cards, all with at least
// `need` free) for a container; free is every card's free units at that moment. The result
// must be k distinct members of cand.
type chooser func(node Node, free []int64, cand []int, need int64, k int) []int

// byPreference turns a card order into a chooser: sort the candidates, take the first k.
func byPreference(better prefer) chooser {
	return func(node Node, free []int64, cand []int, need int64, k int) []int {
		sort.Slice(cand, func(x, y int) bool {
			a, b := cand[x], cand[y]
			return better(node.Cards[a], node.Cards[b], free[a], free[b], need)
		})
		return cand[:k]
	}
}

// bestFit prefers the fitting card with the least free units, lowest index on ties.
func bestFit(a, b Card, fa, fb, _ int64) bool {
	if fa != fb {
		return fa < fb
	}
	return a.Index < b.Index
}

// Fit reports whether req can be placed on node, with the same answer every policy's Place
// gives (each falls back to the best-fit order when its own order fails). It is what filter
// calls: nil, or a *FitError naming the per-card shortfall.
func Fit(node Node, req gpushare.PodRequest) error {
	_, err := place(node, req, byPreference(bestFit))
	return err
}

// placeWithFallback runs place with the policy's chooser and, if that greedy pass fails,
// once more in best-fit order, so a policy never rejects what Fit accepts.
func placeWithFallback(node Node, req gpushare.PodRequest, choose chooser) (Placement, error) {
	p, err := place(node, req, choose)
	if err == nil || len(req.Containers) < 2 {
		return p, err
	}
	return place(node, req, byPreference(bestFit))
}

// place is the fit algorithm shared by all policies.
//
//  1. App and sidecar containers (they run together) are placed largest per-card need first;
//     each takes `Cards` distinct cards with at least PerCard free, picked by `choose`.
//  2. Each regular init container runs alone beside the sidecars, so it may reuse what the pod
//     already holds on a card; it takes the cards that need the least extra, then best fit.
//
// Greedy: for single-container pods (nearly all) it is exact; for several containers with
// mixed sizes it may miss a packing that exists, never over-commits a card.
func place(node Node, req gpushare.PodRequest, choose chooser) (Placement, error) {
	if len(node.Cards) == 0 {
		return Placement{}, fitErrorf("node has no GPU cards")
	}
	if req.IsZero() {
		return Placement{Usage: gpushare.CardUnits{}}, nil
	}
	if err := singleShortfall(node, req); err != nil {
		return Placement{}, err
	}
	free := make([]int64, len(node.Cards))
	for i, c := range node.Cards {
		free[i] = c.Free()
	}
	held := make([]int64, len(node.Cards))     // what the pod holds per card so far
	sidecars := make([]int64, len(node.Cards)) // sidecar units per card
	var alloc gpushare.PodAllocation
	multi := len(req.Containers) > 1

	order := make([]gpushare.ContainerRequest, 0, len(req.Containers))
	var inits []gpushare.ContainerRequest
	for _, c := range req.Containers {
		if c.Kind == gpushare.Init {
			inits = append(inits, c)
		} else {
			order = append(order, c)
		}
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].PerCard() != order[j].PerCard() {
			return order[i].PerCard() > order[j].PerCard()
		}
		return order[i].Cards > order[j].Cards
	})

	cand := make([]int, 0, len(node.Cards))
	for _, c := range order {
		need := c.PerCard()
		cand = cand[:0]
		for i := range node.Cards {
			if free[i] >= need {
				cand = append(cand, i)
			}
		}
		if len(cand) < c.Cards {
			return Placement{}, shortfall(node, free, c, multi)
		}
		cu := make(gpushare.CardUnits, c.Cards)
		for _, i := range choose(node, free, cand, need, c.Cards) {
			free[i] -= need
			held[i] += need
			if c.Kind == gpushare.Sidecar {
				sidecars[i] += need
			}
			cu[node.Cards[i].Index] = need
		}
		alloc.Set(c.Ref, cu)
	}

	for _, c := range inits {
		need := c.PerCard()
		extra := func(i int) int64 {
			if e := need + sidecars[i] - held[i]; e > 0 {
				return e
			}
			return 0
		}
		cand = cand[:0]
		for i := range node.Cards {
			if node.Cards[i].Healthy && extra(i) <= free[i] {
				cand = append(cand, i)
			}
		}
		if len(cand) < c.Cards {
			return Placement{}, shortfall(node, free, c, multi)
		}
		sort.Slice(cand, func(x, y int) bool {
			a, b := cand[x], cand[y]
			if ea, eb := extra(a), extra(b); ea != eb {
				return ea < eb
			}
			return bestFit(node.Cards[a], node.Cards[b], free[a], free[b], need)
		})
		cu := make(gpushare.CardUnits, c.Cards)
		for _, i := range cand[:c.Cards] {
			e := extra(i)
			free[i] -= e
			held[i] += e
			cu[node.Cards[i].Index] = need
		}
		alloc.Set(c.Ref, cu)
	}

	usage := make(gpushare.CardUnits)
	for i, h := range held {
		if h > 0 {
			usage[node.Cards[i].Index] = h
		}
	}
	return Placement{Allocation: alloc, Usage: usage}, nil
}

// singleShortfall answers a pod with one app container that cannot fit without allocating
// the placement state: filter asks this of every failing node. The reason is the one place
// would give (the container is the first placed, so the free units are the cards' own).
func singleShortfall(node Node, req gpushare.PodRequest) *FitError {
	if len(req.Containers) != 1 || req.Containers[0].Kind == gpushare.Init {
		return nil
	}
	c := req.Containers[0]
	fitting := 0
	for _, card := range node.Cards {
		if card.Free() >= c.PerCard() {
			fitting++
		}
	}
	if fitting >= c.Cards {
		return nil
	}
	var buf [16]int64 // typical nodes have up to 8 or 16 cards: no heap allocation
	free := buf[:0]
	for _, card := range node.Cards {
		free = append(free, card.Free())
	}
	return shortfall(node, free, c, false)
}

// shortfall builds the FitError for container c given the free units at the time it failed.
// It appends into one buffer: filter builds a reason for every failing node of every call.
func shortfall(node Node, free []int64, c gpushare.ContainerRequest, multi bool) *FitError {
	b := make([]byte, 0, 64+16*len(node.Cards))
	if multi {
		b = append(b, "container "...)
		b = strconv.AppendQuote(b, c.Name)
		b = append(b, ": "...)
	}
	need := c.PerCard()
	var largest int64
	fitting := 0
	for _, f := range free {
		if f > largest {
			largest = f
		}
		if f >= need {
			fitting++
		}
	}
	b = append(b, "need "...)
	b = strconv.AppendInt(b, need, 10)
	if c.Cards == 1 {
		b = append(b, " on one card; largest free "...)
		b = strconv.AppendInt(b, largest, 10)
	} else {
		b = append(b, " on each of "...)
		b = strconv.AppendInt(b, int64(c.Cards), 10)
		b = append(b, " cards; "...)
		b = strconv.AppendInt(b, int64(fitting), 10)
		b = append(b, " of "...)
		b = strconv.AppendInt(b, int64(len(node.Cards)), 10)
		b = append(b, " cards have that free"...)
	}
	b = append(b, " ("...)
	for i, card := range node.Cards {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, "card"...)
		b = strconv.AppendInt(b, int64(card.Index), 10)
		if !card.Healthy {
			b = append(b, " unhealthy"...)
			continue
		}
		b = append(b, ' ')
		b = strconv.AppendInt(b, free[i], 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, card.Total, 10)
	}
	b = append(b, ')')
	return &FitError{Reason: string(b)}
}
