package policy

import (
	"unsafe"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

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
// It builds the text here, once, into one sized buffer: filter reports a reason for every
// failing node of every call, often the same memoised error (cache's lastMiss) again.
func shortfall(node Node, free []int64, c gpushare.ContainerRequest, multi bool) *FitError {
	e := &FitError{Requested: c.PerCard(), Cards: c.Cards, Free: make([]CardFree, len(node.Cards))}
	if multi {
		e.Container = c.Name
	}
	for i, card := range node.Cards {
		e.Free[i] = CardFree{Index: card.Index, Free: free[i], Total: card.Total, Unhealthy: !card.Healthy}
		e.LargestFree = max(e.LargestFree, free[i])
	}
	// The buffer is never written again, so the text can be the buffer itself (as
	// strings.Builder does), saving a copy per failing node.
	b := e.appendReason(make([]byte, 0, 64+16*len(node.Cards)))
	e.msg = unsafe.String(unsafe.SliceData(b), len(b))
	return e
}
