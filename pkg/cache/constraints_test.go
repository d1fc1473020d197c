package cache

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// affinity is a required node affinity of one term per argument, each a list of
// requirements key In values.
func affinity(terms ...[]corev1.NodeSelectorRequirement) *corev1.Affinity {
	ts := make([]corev1.NodeSelectorTerm, len(terms))
	for i, t := range terms {
		ts[i] = corev1.NodeSelectorTerm{MatchExpressions: t}
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: ts},
	}}
}

func in(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func TestConstraintSig(t *testing.T) {
	sig := func(sel map[string]string, a *corev1.Affinity) string {
		s, ok := constraintSig(&corev1.PodSpec{NodeSelector: sel, Affinity: a})
		if !ok {
			t.Fatalf("signature of %v %v too long", sel, a)
		}
		return s
	}
	base := sig(map[string]string{"a": "1", "b": "2"}, affinity([]corev1.NodeSelectorRequirement{in("m", "T4", "P100"), in("z", "1")}, []corev1.NodeSelectorRequirement{in("m", "V100")}))
	for _, tc := range []struct {
		name string
		sel  map[string]string
		aff  *corev1.Affinity
		same bool
	}{
		{"terms, requirements and values reordered, a value repeated", map[string]string{"b": "2", "a": "1"},
			affinity([]corev1.NodeSelectorRequirement{in("m", "V100")}, []corev1.NodeSelectorRequirement{in("z", "1"), in("m", "P100", "T4", "T4")}), true},
		{"another value", map[string]string{"a": "1", "b": "2"},
			affinity([]corev1.NodeSelectorRequirement{in("m", "T4"), in("z", "1")}, []corev1.NodeSelectorRequirement{in("m", "V100")}), false},
		{"terms merged into one", map[string]string{"a": "1", "b": "2"},
			affinity([]corev1.NodeSelectorRequirement{in("m", "T4", "P100"), in("z", "1"), in("m", "V100")}), false},
		{"selector differs", map[string]string{"a": "1"},
			affinity([]corev1.NodeSelectorRequirement{in("m", "T4", "P100"), in("z", "1")}, []corev1.NodeSelectorRequirement{in("m", "V100")}), false},
		{"a key that reads like a separator", map[string]string{"a": "1;sb=2"},
			affinity([]corev1.NodeSelectorRequirement{in("m", "T4", "P100"), in("z", "1")}, []corev1.NodeSelectorRequirement{in("m", "V100")}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sig(tc.sel, tc.aff) == base; got != tc.same {
				t.Errorf("same signature = %v, want %v", got, tc.same)
			}
		})
	}
	if s := sig(nil, nil); s != "" {
		t.Errorf("no constraint: signature %q, want empty", s)
	}
	if _, ok := constraintSig(&corev1.PodSpec{NodeSelector: map[string]string{"k": strings.Repeat("v", maxConstraintSig)}}); ok {
		t.Error("a signature over the bound is accepted")
	}
}

func TestConstraintBook(t *testing.T) {
	b := newConstraintBook()
	pod := func(sel map[string]string, a *corev1.Affinity) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: sel, Affinity: a}}
	}
	t4 := pod(nil, affinity([]corev1.NodeSelectorRequirement{in("product", "T4")}))
	zoneA := pod(map[string]string{"zone": "a"}, nil)
	// An operator the scheduler cannot parse: no node meets it.
	bad := pod(nil, affinity([]corev1.NodeSelectorRequirement{{Key: "product", Operator: "Near", Values: []string{"T4"}}}))
	for _, tc := range []struct {
		pod  *corev1.Pod
		want uint8
	}{{pod(nil, nil), 0}, {t4, 1}, {zoneA, 2}, {t4, 1}, {bad, 3}} {
		if got := b.id(tc.pod); got != tc.want {
			t.Errorf("id of %+v = %d, want %d", tc.pod.Spec, got, tc.want)
		}
	}
	// A T4 node in zone b fails 2 and 3; asked again after a fourth constraint, it is only
	// matched against that one.
	set, at := b.unmet("n1", map[string]string{"product": "T4", "zone": "b"}, nil, nil, 0)
	if at != 3 || set.Has(1) || !set.Has(2) || !set.Has(3) {
		t.Errorf("unmet %v at %d, want {2, 3} at 3", set, at)
	}
	other, _ := b.unmet("n2", map[string]string{"product": "T4", "zone": "b"}, nil, nil, 0)
	if &other[0] != &set[0] {
		t.Error("equal sets are not shared")
	}
	b.id(pod(map[string]string{"zone": "b"}, nil))
	if again, at := b.unmet("n1", map[string]string{"product": "T4", "zone": "b"}, nil, set, at); at != 4 || &again[0] != &set[0] {
		t.Errorf("after a constraint the node meets: %v at %d, want the same set at 4", again, at)
	}
	// Past maxConstraints a pod counts as unconstrained.
	for i := b.count(); i < maxConstraints; i++ {
		b.id(pod(map[string]string{"k": strings.Repeat("x", i)}, nil))
	}
	if got := b.id(pod(map[string]string{"k": "one too many"}, nil)); got != 0 || b.count() != maxConstraints {
		t.Errorf("past the bound: id %d, count %d; want 0, %d", got, b.count(), maxConstraints)
	}
	if got := b.id(t4); got != 1 {
		t.Errorf("a known constraint past the bound: id %d, want 1", got)
	}
}
