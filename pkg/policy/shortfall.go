package policy

import (
	"strconv"

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
