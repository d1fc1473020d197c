package policy

// Score is node's priority for placement p judged alone, 0..10, without comparing it with
// other nodes (Rank does that): the coarser integer the extender answered before it ranked
// nodes against each other, kept so that the offline replay can still compare the two. A
// policy defined outside this package gets its Rate, read as a share in [0,1], scaled.
func Score(pol Policy, node Node, p Placement) int64 {
	if s, ok := pol.(interface{ score(Node, Placement) int64 }); ok {
		return s.score(node, p)
	}
	return scale(pol.Rate(node, p))
}

// fullness returns, after the placement u, the used share of the cards u touches and of the
// whole node (healthy cards), each in [0,1].
func fullness(node Node, u usage) (cards, whole float64) {
	var cUsed, cTotal, nUsed, nTotal int64
	for i, c := range node.Cards {
		if !c.Healthy || c.Total <= 0 {
			continue
		}
		used := c.Used + u.units[i]
		if used > c.Total {
			used = c.Total
		}
		nUsed += used
		nTotal += c.Total
		if u.units[i] > 0 {
			cUsed += used
			cTotal += c.Total
		}
	}
	if nTotal == 0 {
		return 0, 0
	}
	whole = float64(nUsed) / float64(nTotal)
	cards = whole
	if cTotal > 0 {
		cards = float64(cUsed) / float64(cTotal)
	}
	return cards, whole
}

// scale maps a value in [0,1] to 0..maxScore, rounding to nearest and clamping.
func scale(v float64) int64 {
	s := int64(v*float64(maxScore) + 0.5)
	switch {
	case s < 0:
		return 0
	case s > maxScore:
		return maxScore
	}
	return s
}
