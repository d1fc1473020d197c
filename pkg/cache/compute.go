package cache

import (
	"slices"
	"strconv"
	"strings"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// computeInvalid is Pod.compute for a pod whose compute-share annotation does not read: it
// counts as a whole card of compute and as a memory-only grant, so that no pod of either
// kind joins it on its cards.
const computeInvalid = 255

// cardCompute is what a card's counted pods take of its compute: the sum of their compute
// shares in percent (gpushare.PodRequest.PeakCompute each), and whether any pod without a
// share holds units there (a memory-only MPS client, uncapped in SMs).
type cardCompute struct {
	pct     int
	memOnly bool
}

// ComputeError says why no card of a node takes a pod by compute: a pod with a compute share
// (gpushare.AnnotationComputeShare) needs a card with its percent free that holds no
// memory-only grant, a pod without one a card that holds no compute share. Evicting pods is
// not tried for it (the schedulers' preemption dry run counts memory alone).
type ComputeError struct {
	// Need is the pod's compute share per card in percent (PeakCompute); 0 for a pod
	// without one.
	Need int
	// Cards says why each card of the node is refused, e.g. "card0 holds memory-only grants",
	// "card1 80 percent committed". No "%": kube-scheduler passes the reasons to its event
	// recorder as a format string.
	Cards []string
}

func (e *ComputeError) Error() string {
	var b strings.Builder
	if e.Need > 0 {
		b.WriteString("no card with " + strconv.Itoa(e.Need) + " percent compute free and no memory-only grants (" + gpushare.AnnotationComputeShare + ")")
	} else {
		b.WriteString("no card free of compute shares (" + gpushare.AnnotationComputeShare + "): a container without one would run uncapped in SMs beside them")
	}
	if len(e.Cards) > 0 {
		b.WriteString(": " + strings.Join(e.Cards, ", "))
	}
	return b.String()
}

// tallyCompute rebuilds n.compute from the counted usage of n's pods: on an MPS node every
// card a pod holds, elsewhere only those of pods with a compute share (which a node that
// was relabelled may still hold); nil when nothing is held. Caller holds n.mu.
func (n *nodeState) tallyCompute() {
	n.compute = nil
	mps := n.isolation.mode() == gpushare.IsolationMPS
	for _, e := range n.pods {
		if e.compute == 0 && !mps {
			continue
		}
		for _, u := range e.counted() {
			if u.units == 0 && e.compute == 0 {
				continue
			}
			if n.compute == nil {
				n.compute = map[int]cardCompute{}
			}
			cc := n.compute[u.card]
			switch e.compute {
			case 0:
				cc.memOnly = true
			case computeInvalid:
				cc.pct, cc.memOnly = cc.pct+gpushare.MaxComputeShare, true
			default:
				cc.pct += int(e.compute)
			}
			n.compute[u.card] = cc
		}
	}
}

// holdsCompute reports whether a pod with a compute share holds a card of n. Caller holds
// n.mu.
func (n *nodeState) holdsCompute() bool {
	for _, cc := range n.compute {
		if cc.pct > 0 {
			return true
		}
	}
	return false
}

// sortsByCompute reports whether card choice for req on n must leave cards out by compute
// (computeCards): req has a compute share, or n holds one. Caller holds n.mu.
func (n *nodeState) sortsByCompute(req gpushare.PodRequest) bool {
	return req.Computes() || n.holdsCompute()
}

// computeCards is cards less those req may not use by compute: for a pod with a compute
// share, cards holding a memory-only grant or without its PeakCompute free (no card over
// 100 %); for a pod without one, cards holding a compute share (a card holds one kind or
// the other). cards itself when none is left out; *ComputeError when none is left. Caller
// holds n.mu.
func (n *nodeState) computeCards(cards []policy.Card, req gpushare.PodRequest) ([]policy.Card, error) {
	if !n.sortsByCompute(req) {
		return cards, nil
	}
	need := req.PeakCompute()
	var out []policy.Card
	var refused []string
	for _, c := range cards {
		cc := n.compute[c.Index]
		switch {
		case need > 0 && cc.memOnly:
			refused = append(refused, "card"+strconv.Itoa(c.Index)+" holds memory-only grants")
		case need > 0 && cc.pct+need > gpushare.MaxComputeShare, need == 0 && cc.pct > 0:
			refused = append(refused, "card"+strconv.Itoa(c.Index)+" "+strconv.Itoa(cc.pct)+" percent committed")
		default:
			out = append(out, c)
		}
	}
	if len(refused) == 0 {
		return cards, nil
	}
	if len(out) == 0 {
		return nil, &ComputeError{Need: need, Cards: refused}
	}
	return slices.Clip(out), nil
}
