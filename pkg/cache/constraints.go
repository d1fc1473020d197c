package cache

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// podConstraint is a pod's node constraint as the scheduler matches it (required node
// affinity and node selector) and, for a pod that chooses its cards by annotation, its card
// choice, numbered for fgd's typical shapes (policy.Constraint). Pods whose constraints have
// one canonical signature share one podConstraint.
type podConstraint struct {
	id     policy.Constraint
	req    nodeaffinity.RequiredNodeAffinity
	choice *gpushare.CardChoice // nil: any card
}

// Bounds of the constraint book. Pods are written by tenants: past maxConstraints distinct
// constraints, or a signature longer than maxConstraintSig bytes, a pod counts as
// unconstrained, which only makes fgd rate it as it did before it knew constraints. A Pod
// keeps its constraint's id in one byte (Pod.constraint), where its size class has room.
const (
	maxConstraints   = 255
	maxConstraintSig = 4096
)

// constraintBook numbers the node constraints of the pods seen and says which of them a node
// fails. Safe for concurrent use.
type constraintBook struct {
	// n is len(list), read without mu by hostBook.free on every node of a prioritize call.
	n     atomic.Int32
	mu    sync.RWMutex
	bySig map[string]*podConstraint
	list  []*podConstraint // list[id-1]
	// sets interns the Unmet sets handed out, so that nodes failing the same constraints
	// share one array (policy.ReachOf and the Scorer's memo compare it first).
	sets map[string]policy.ConstraintSet
}

func newConstraintBook() *constraintBook {
	return &constraintBook{bySig: map[string]*podConstraint{}, sets: map[string]policy.ConstraintSet{}}
}

// id returns the number of the pod's constraint: 0 for a pod without one or past the bounds.
func (b *constraintBook) id(pod *corev1.Pod) uint8 {
	if c := b.of(pod); c != nil {
		return uint8(c.id)
	}
	return 0
}

// of returns the pod's constraint, numbering it when new; nil for a pod without one or past
// the bounds.
func (b *constraintBook) of(pod *corev1.Pod) *podConstraint {
	sig, ok := constraintSig(&pod.Spec)
	// Invalid card annotations never schedule: such a pod counts by its node constraint alone.
	choice, _ := gpushare.ParseCardChoice(pod.Annotations)
	if choice.Restricts() {
		sig += choiceSig(choice)
	} else {
		choice = nil
	}
	if !ok || sig == "" || len(sig) > maxConstraintSig {
		return nil
	}
	b.mu.RLock()
	c := b.bySig[sig]
	b.mu.RUnlock()
	if c != nil {
		return c
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c = b.bySig[sig]; c != nil || len(b.list) >= maxConstraints {
		return c
	}
	c = &podConstraint{id: policy.Constraint(len(b.list) + 1), req: nodeaffinity.GetRequiredNodeAffinity(pod), choice: choice}
	b.bySig[sig] = c
	b.list = append(b.list, c)
	b.n.Store(int32(len(b.list)))
	return c
}

// count is how many constraints are numbered (the highest id).
func (b *constraintBook) count() int { return int(b.n.Load()) }

// unmet returns set extended with the constraints from+1..count() that the node with name,
// labels and cards devices fails, and count(): the caller keeps both and asks again from there
// once more constraints are numbered. A constraint the scheduler could not parse is failed
// everywhere, as the scheduler's filter fails it. A card choice fails a node none of whose
// cards it allows; a node with some allowed cards meets it, whatever its others (fgd then
// counts all its free units as usable for the shape).
func (b *constraintBook) unmet(name string, labels map[string]string, devices []gpushare.Device, set policy.ConstraintSet, from int) (policy.ConstraintSet, int) {
	b.mu.RLock()
	list := b.list
	b.mu.RUnlock()
	if from >= len(list) {
		return set, from
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	changed := false
	for _, c := range list[from:] {
		if ok, err := c.req.Match(node); !ok || err != nil || !c.allowsAny(devices) {
			set, changed = set.With(c.id), true
		}
	}
	if !changed {
		return set, len(list)
	}
	return b.intern(set), len(list)
}

// allowsAny reports whether c's card choice allows one of devices (any, without a choice).
func (c *podConstraint) allowsAny(devices []gpushare.Device) bool {
	if c.choice == nil {
		return true
	}
	for _, d := range devices {
		if c.choice.Allows(d.Model, d.UUID) {
			return true
		}
	}
	return false
}

// choiceSig is a canonical text of a card choice's rules: equal for rules that differ only in
// the order or repetition of their values.
func choiceSig(c *gpushare.CardChoice) string {
	var b strings.Builder
	for _, r := range c.Rules {
		vals := slices.Compact(slices.Sorted(slices.Values(r.Values)))
		b.WriteString("c" + strconv.Quote(r.Key) + "[")
		for _, v := range vals {
			b.WriteString(strconv.Quote(v) + ",")
		}
		b.WriteString("];")
	}
	return b.String()
}

// intern returns the shared set equal to set.
func (b *constraintBook) intern(set policy.ConstraintSet) policy.ConstraintSet {
	var k strings.Builder
	for _, w := range set {
		k.WriteString(strconv.FormatUint(w, 36))
		k.WriteByte(',')
	}
	key := k.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.sets[key]; ok {
		return s
	}
	b.sets[key] = set
	return set
}

// constraintSig is a canonical text of spec's node selector and required node affinity:
// equal for constraints that differ only in the order of selector entries, terms,
// requirements or values, or in repeated values; "" for none. false: longer than
// maxConstraintSig.
func constraintSig(spec *corev1.PodSpec) (string, bool) {
	var b strings.Builder
	keys := make([]string, 0, len(spec.NodeSelector))
	for k := range spec.NodeSelector {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString("s" + strconv.Quote(k) + "=" + strconv.Quote(spec.NodeSelector[k]) + ";")
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		texts := make([]string, 0, len(terms))
		for _, t := range terms {
			var reqs []string
			reqs = appendReqs(reqs, "e", t.MatchExpressions)
			reqs = appendReqs(reqs, "f", t.MatchFields)
			slices.Sort(reqs)
			texts = append(texts, "("+strings.Join(slices.Compact(reqs), "&")+")")
		}
		slices.Sort(texts)
		b.WriteString("a" + strings.Join(slices.Compact(texts), "|"))
	}
	return b.String(), b.Len() <= maxConstraintSig
}

// appendReqs appends the canonical text of each requirement: kind, key, operator and the
// sorted distinct values.
func appendReqs(out []string, kind string, reqs []corev1.NodeSelectorRequirement) []string {
	for _, r := range reqs {
		vals := slices.Compact(slices.Sorted(slices.Values(r.Values)))
		q := make([]string, len(vals))
		for i, v := range vals {
			q[i] = strconv.Quote(v)
		}
		out = append(out, kind+strconv.Quote(r.Key)+string(r.Operator)+"["+strings.Join(q, ",")+"]")
	}
	return out
}
