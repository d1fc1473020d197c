package policy

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
