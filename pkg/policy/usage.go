package policy

// usage is a placement reduced to what scoring reads. Scoring from it rather than from a
// Placement lets a Scorer score without building the annotation-shaped maps.
type usage struct {
	// units is what the pod takes on each card, by card position (units[i] is on
	// node.Cards[i]), in gpu-mem units.
	units []int64
	// holds reports that the pod takes gpu-mem at all (false for a pod without gpu-mem).
	holds bool
	host  Host // the pod's CPU and memory request
}

// usageOf reduces p on node, appending the per-card units to buf: a caller passing a slice
// of a stack array allocates nothing for nodes of up to that many cards. Usage on an index
// that node lacks is ignored, as every score always did. Card indexes must be distinct.
func usageOf(node Node, p Placement, buf []int64) usage {
	for _, c := range node.Cards {
		buf = append(buf, p.Usage[c.Index])
	}
	return usage{units: buf, holds: len(p.Usage) > 0, host: p.Host}
}

// holdsAny reports whether any card holds units: what len(Placement.Usage) > 0 says for a
// placement of Place, whose Usage lists exactly the cards with units held.
func holdsAny(units []int64) bool {
	for _, u := range units {
		if u > 0 {
			return true
		}
	}
	return false
}
