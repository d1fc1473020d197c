package scale

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestCheckCards(t *testing.T) {
	o := DefaultObjects()
	now := time.Unix(0, 0)
	placed := func(i int, node string, card int, units int64) *corev1.Pod {
		return o.PlacedPod(i, node, card, units, now)
	}
	unbound := o.Pod("x", 9, PodShape{Units: 4, Cards: 1})
	unannotated := o.Pod("x", 10, PodShape{Units: 4, Cards: 1})
	unannotated.Spec.NodeName = "a"
	tests := []struct {
		name            string
		pods            []*corev1.Pod
		wantOver        []string
		wantUnannotated []string
		wantNodes       int
	}{
		{"full card is fine", []*corev1.Pod{placed(0, "a", 0, 10), placed(1, "a", 0, 6)}, []string{}, []string{}, 1},
		{"one unit over", []*corev1.Pod{placed(0, "a", 1, 10), placed(1, "a", 1, 7), placed(2, "b", 1, 16)}, []string{"a/1: 17 > 16"}, []string{}, 2},
		{"unbound skipped, unannotated named", []*corev1.Pod{unbound, unannotated}, []string{}, []string{"x-00010"}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkCards(o.Resources, tc.pods, 16)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantOver, got.Over); diff != "" {
				t.Errorf("over (-want,+got):\n%s", diff)
			}
			if got.Nodes != tc.wantNodes {
				t.Errorf("nodes %d, want %d", got.Nodes, tc.wantNodes)
			}
			if diff := cmp.Diff(tc.wantUnannotated, got.Unannotated); diff != "" {
				t.Errorf("unannotated (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestCheckCardsBadAnnotation(t *testing.T) {
	o := DefaultObjects()
	p := o.PlacedPod(0, "a", 0, 4, time.Unix(0, 0))
	for k := range p.Annotations {
		p.Annotations[k] = "{not json"
	}
	if _, err := checkCards(o.Resources, []*corev1.Pod{p}, 16); err == nil {
		t.Errorf("checkCards accepted a malformed allocation annotation")
	}
}
