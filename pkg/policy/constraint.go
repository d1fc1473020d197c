package policy

// Constraint numbers the node constraint of a typical pod (Shape.Constraint): its required
// node affinity and node selector in a canonical form, numbered by the caller from 1. 0 is
// no constraint, which every node meets.
type Constraint uint32

// ConstraintSet is a set of Constraints: bit c%64 of word c/64 for Constraint c. The zero
// value is empty; 0 is never in a set.
type ConstraintSet []uint64

// Has reports whether c is in the set.
func (s ConstraintSet) Has(c Constraint) bool {
	w := int(c / 64)
	return c != 0 && w < len(s) && s[w]&(1<<(c%64)) != 0
}

// With returns a new set: s and c. s is not modified (nodes may share it).
func (s ConstraintSet) With(c Constraint) ConstraintSet {
	out := make(ConstraintSet, max(len(s), int(c/64)+1))
	copy(out, s)
	if c != 0 {
		out[c/64] |= 1 << (c % 64)
	}
	return out
}

// Reach is what the free card units of a cluster offer each constraint: Total, the free units
// of all its nodes, and ByConstraint[c], those of the nodes that meet Constraint c (index 0
// is Total too).
type Reach struct {
	Total        int64
	ByConstraint []int64
}

// ReachOf sums the free units of nodes for constraints 0..n-1 (ReachCounter).
func ReachOf(nodes []Node, n int) Reach {
	var r ReachCounter
	for _, node := range nodes {
		r.Add(node)
	}
	return r.Reach(n)
}

// ReachCounter sums Reach node by node. Nodes sharing one Unmet set (the usual case: one set
// per kind of node) are tested against the constraints once. The zero value is empty.
type ReachCounter struct {
	total, meetAll int64
	classes        []reachClass
}

type reachClass struct {
	unmet ConstraintSet
	free  int64
}

// Add counts node's free units.
func (r *ReachCounter) Add(node Node) {
	var free int64
	for _, c := range node.Cards {
		free += c.Free()
	}
	r.total += free
	if len(node.Unmet) == 0 {
		r.meetAll += free
		return
	}
	k := 0
	for k < len(r.classes) && !sameSet(r.classes[k].unmet, node.Unmet) {
		k++
	}
	if k == len(r.classes) {
		r.classes = append(r.classes, reachClass{unmet: node.Unmet})
	}
	r.classes[k].free += free
}

// Reach is the sums for constraints 0..n-1.
func (r *ReachCounter) Reach(n int) Reach {
	out := Reach{Total: r.total, ByConstraint: make([]int64, max(n, 1))}
	out.ByConstraint[0] = r.total
	for c := 1; c < len(out.ByConstraint); c++ {
		out.ByConstraint[c] = r.meetAll
		for _, cl := range r.classes {
			if !cl.unmet.Has(Constraint(c)) {
				out.ByConstraint[c] += cl.free
			}
		}
	}
	return out
}

// sameSet reports whether a and b hold the same constraints, by their shared array when
// they are one set, else word by word.
func sameSet(a, b ConstraintSet) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// ByScarcity returns w with each constrained shape's weight multiplied by how scarce the free
// units it can reach are: r.Total / r.ByConstraint[c] (at least 1), or 0 where no free unit
// meets c (such a pod fits nowhere, so where others go cannot matter to it). A shape whose
// constraint r does not cover, and every shape when r has no free units, keeps its weight.
// w is not modified; w itself is returned when nothing changes.
func (w Workload) ByScarcity(r Reach) Workload {
	var out Workload
	for i, s := range w {
		c := int(s.Constraint)
		if c == 0 || c >= len(r.ByConstraint) || r.Total <= 0 {
			continue
		}
		if out == nil {
			out = append(Workload(nil), w...)
		}
		if reach := r.ByConstraint[c]; reach > 0 {
			out[i].Weight *= float64(r.Total) / float64(reach)
		} else {
			out[i].Weight = 0
		}
	}
	if out == nil {
		return w
	}
	return out
}
