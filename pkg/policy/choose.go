package policy

// chooser picks k of the candidate card positions (indexes into node.Cards, all with at
// least `need` units free) for one container; free is every card's free units at that
// moment, by position. It may reorder cand and use s's fgd buffers. The result must be k
// distinct members of cand, and is read before the chooser is called again.
type chooser func(node Node, free []int64, cand []int, need int64, k int, s *scratch) []int

// The card orders: whether card a is a better choice than card b, given their free units
// fa and fb at that moment. Both are total over cards of distinct NVML index.

// bestFit prefers the card with the least free units, lowest index on ties.
func bestFit(a, b Card, fa, fb int64) bool {
	if fa != fb {
		return fa < fb
	}
	return a.Index < b.Index
}

// mostFree prefers the card with the most free units, lowest index on ties.
func mostFree(a, b Card, fa, fb int64) bool {
	if fa != fb {
		return fa > fb
	}
	return a.Index < b.Index
}

// chooseBestFit takes the k fitting cards with the least free units.
func chooseBestFit(node Node, free []int64, cand []int, _ int64, k int, _ *scratch) []int {
	return selectFirst(cand, k, func(a, b int) bool {
		return bestFit(node.Cards[a], node.Cards[b], free[a], free[b])
	})
}

// chooseMostFree takes the k fitting cards with the most free units.
func chooseMostFree(node Node, free []int64, cand []int, _ int64, k int, _ *scratch) []int {
	return selectFirst(cand, k, func(a, b int) bool {
		return mostFree(node.Cards[a], node.Cards[b], free[a], free[b])
	})
}
