package policy

import "strconv"

// FitError says why a pod cannot be placed on a node, with the numbers behind it, in the way
// of the scheduler's InsufficientResource. Error() puts them in words a user can act on, e.g.
// "need 10 on one card; largest free 8 (card0 8/16, card1 8/16)" (free/total per card).
// All quantities are gpu-mem units.
type FitError struct {
	// Container is the container that found too few cards, named only when the pod asks
	// gpu-mem for several containers (empty otherwise).
	Container string
	// Requested is the units the container wants on each card, Cards how many distinct
	// cards it wants.
	Requested int64
	Cards     int
	// LargestFree is the most units free on one card when the container failed (0 on a
	// node without healthy cards).
	LargestFree int64
	// Free is every card of the node, in node order, as it was when the container failed;
	// empty: the node has no cards.
	Free []CardFree

	msg string // Error's text, built once where the error is made: filter reports it per node
}

// CardFree is one card in a FitError: the units a container could still take there (Free,
// after what the pod's earlier containers took; 0 on an unhealthy card) and its capacity.
type CardFree struct {
	Index     int // NVML index
	Free      int64
	Total     int64
	Unhealthy bool
}

func (e *FitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return string(e.appendReason(nil))
}

// fitting is how many cards have Requested free.
func (e *FitError) fitting() int {
	n := 0
	for _, c := range e.Free {
		if c.Free >= e.Requested {
			n++
		}
	}
	return n
}

// appendReason appends Error's text to b.
func (e *FitError) appendReason(b []byte) []byte {
	if len(e.Free) == 0 {
		return append(b, "node has no GPU cards"...)
	}
	if e.Container != "" {
		b = append(b, "container "...)
		b = strconv.AppendQuote(b, e.Container)
		b = append(b, ": "...)
	}
	b = append(b, "need "...)
	b = strconv.AppendInt(b, e.Requested, 10)
	if e.Cards == 1 {
		b = append(b, " on one card; largest free "...)
		b = strconv.AppendInt(b, e.LargestFree, 10)
	} else {
		b = append(b, " on each of "...)
		b = strconv.AppendInt(b, int64(e.Cards), 10)
		b = append(b, " cards; "...)
		b = strconv.AppendInt(b, int64(e.fitting()), 10)
		b = append(b, " of "...)
		b = strconv.AppendInt(b, int64(len(e.Free)), 10)
		b = append(b, " cards have that free"...)
	}
	b = append(b, " ("...)
	for i, c := range e.Free {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, "card"...)
		b = strconv.AppendInt(b, int64(c.Index), 10)
		if c.Unhealthy {
			b = append(b, " unhealthy"...)
			continue
		}
		b = append(b, ' ')
		b = strconv.AppendInt(b, c.Free, 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, c.Total, 10)
	}
	return append(b, ')')
}
