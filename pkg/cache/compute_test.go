package cache_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// sharing is a pod of units gpu-mem whose container "main" has a compute share of v
// ("" for none).
func sharing(name string, units int64, v string) *corev1.Pod {
	p := ct.Pod(name, units)
	if v != "" {
		p.Annotations = map[string]string{gpushare.AnnotationComputeShare: "main=" + v}
	}
	return p
}

// placedSharing is sharing placed on node with cards, its annotation beside the record.
func placedSharing(name string, units int64, v, node string, cards gpushare.CardUnits) *corev1.Pod {
	p := ct.Placed(ct.Pod(name, units), node, cards)
	if v != "" {
		p.Annotations[gpushare.AnnotationComputeShare] = v
	}
	return p
}

// TestComputeCardChoice: on an MPS node a card holds compute-share pods up to 100 % or
// memory-only pods, never both: Reserve puts each kind on its own card, a share that would
// take a card past 100 % or onto a memory-only card fails with *ComputeError naming each
// card, and a memory-only pod does not join a card that holds shares. Fits, PlaceWith and
// Reserve agree.
func TestComputeCardChoice(t *testing.T) {
	env := ct.Start(t, time.Minute, isolated("mps", "mps"))
	pol := binpack(t)
	reserve := func(p *corev1.Pod) (int, error) {
		t.Helper()
		req, err := gpushare.DefaultResources().PlacementRequest(p)
		if err != nil {
			t.Fatal(err)
		}
		fitErr := env.Cache.Fits("mps", req, pol)
		_, dryErr := env.Cache.PlaceWith("mps", req, pol, nil)
		rsv, err := env.Cache.Reserve(context.Background(), "mps", p, req, pol)
		if (fitErr == nil) != (err == nil) || (dryErr == nil) != (err == nil) {
			t.Fatalf("pod %s: Fits %v, PlaceWith %v, Reserve %v disagree", p.Name, fitErr, dryErr, err)
		}
		if err != nil {
			return -1, err
		}
		return rsv.Placement.Allocation.Cards()[0], nil
	}
	c1, err := reserve(sharing("c1", 4, "25"))
	if err != nil {
		t.Fatal(err)
	}
	m1, err := reserve(sharing("m1", 4, ""))
	if err != nil || m1 == c1 {
		t.Fatalf("memory-only pod on card %d (%v), want the card without shares (c1 on %d)", m1, err, c1)
	}
	if c2, err := reserve(sharing("c2", 4, "50")); err != nil || c2 != c1 {
		t.Fatalf("50%% share on card %d (%v), want c1's card %d", c2, err, c1)
	}
	_, err = reserve(sharing("c3", 4, "30"))
	var ce *cache.ComputeError
	if !errors.As(err, &ce) {
		t.Fatalf("30%% beside 75%% = %v, want *cache.ComputeError", err)
	}
	want := "no card with 30 percent compute free and no memory-only grants (gpushare.io/gpu-core): card0 75 percent committed, card1 holds memory-only grants"
	if c1 == 1 {
		want = "no card with 30 percent compute free and no memory-only grants (gpushare.io/gpu-core): card0 holds memory-only grants, card1 75 percent committed"
	}
	if err.Error() != want {
		t.Errorf("reason %q, want %q", err, want)
	}
	// kube-scheduler hands filter reasons to its event recorder as a format string.
	if strings.Contains(err.Error(), "%") {
		t.Errorf("reason %q holds %%, which kube-scheduler's FailedScheduling event mangles", err)
	}
	if c4, err := reserve(sharing("c4", 4, "25")); err != nil || c4 != c1 {
		t.Fatalf("the last 25%% on card %d (%v), want %d", c4, err, c1)
	}
	// c1's card has 0 units free and 100 % committed; m2 fits only beside m1.
	if m2, err := reserve(sharing("m2", 12, "")); err != nil || m2 != m1 {
		t.Fatalf("memory-only pod on card %d (%v), want %d", m2, err, m1)
	}
}

// TestComputeFromPlacedPods: the ledger reads placed pods' shares from their annotation: a
// memory-only pod does not fit a node whose one card holds a share; a pod whose share does
// not read counts as a whole card of compute and a memory-only grant, so neither kind joins
// it; a node not labelled mps refuses a share with *IsolationError.
func TestComputeFromPlacedPods(t *testing.T) {
	one := func(name, mode string) *corev1.Node {
		n := ct.Node(name, 16)
		n.Labels[gpushare.LabelIsolation] = mode
		return n
	}
	env := ct.Start(t, time.Minute, one("shared", "mps"), one("broken", "mps"), one("plain", "none"),
		placedSharing("c", 4, "main=50", "shared", gpushare.CardUnits{0: 4}),
		placedSharing("b", 4, "main=7", "broken", gpushare.CardUnits{0: 4}))
	pol := binpack(t)
	tests := []struct {
		name, node, share string
		want              string // "" = fits
	}{
		{"a share beside a share", "shared", "50", ""},
		{"past 100 %", "shared", "55", "no card with 55 percent compute free and no memory-only grants (gpushare.io/gpu-core): card0 50 percent committed"},
		{"memory-only beside a share", "shared", "", "no card free of compute shares (gpushare.io/gpu-core): a container without one would run uncapped in SMs beside them: card0 50 percent committed"},
		{"a share beside an unreadable one", "broken", "5", "no card with 5 percent compute free and no memory-only grants (gpushare.io/gpu-core): card0 holds memory-only grants"},
		{"memory-only beside an unreadable one", "broken", "", "no card free of compute shares (gpushare.io/gpu-core): a container without one would run uncapped in SMs beside them: card0 100 percent committed"},
		{"a share off mps", "plain", "25", `container "main" has a compute share (gpushare.io/gpu-core: 25 percent), which only nodes labelled gpushare.io/isolation=mps enforce, and this node is none`},
		{"memory-only off mps", "plain", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := gpushare.DefaultResources().PlacementRequest(sharing("p", 4, tc.share))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if err := env.Cache.Fits(tc.node, req, pol); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Fits(%s) = %q, want %q", tc.node, got, tc.want)
			}
		})
	}
	if p, ok := env.Cache.Pod("default", "b"); !ok {
		t.Error("pod b not in the cache")
	} else if _, err := p.Request(); err == nil {
		t.Error("pod b's Request() reads its unreadable share without error")
	}
}

// TestComputeInViews: prioritize and score see a node's cards as filter does: a pod with a
// compute share sees no card of a node whose cards hold memory-only grants, and only the
// cards without memory-only grants of one that has both; a memory-only pod sees every card
// of a node without shares.
func TestComputeInViews(t *testing.T) {
	one := func(name string) *corev1.Node {
		n := ct.Node(name, 16, 16)
		n.Labels[gpushare.LabelIsolation] = "mps"
		return n
	}
	env := ct.Start(t, time.Minute, one("memonly"), one("mixed"),
		ct.Placed(ct.Pod("m1", 4), "memonly", gpushare.CardUnits{0: 4}),
		ct.Placed(ct.Pod("m2", 4), "memonly", gpushare.CardUnits{1: 4}),
		ct.Placed(ct.Pod("m3", 4), "mixed", gpushare.CardUnits{0: 4}))
	names := []string{"memonly", "mixed"}
	view := func(share string) [][]int {
		req, err := gpushare.DefaultResources().PlacementRequest(sharing("p", 4, share))
		if err != nil {
			t.Fatal(err)
		}
		out := make([][]int, len(names))
		env.Cache.ViewEachFor(names, req, func(i int, n policy.Node) {
			out[i] = []int{}
			for _, c := range n.Cards {
				out[i] = append(out[i], c.Index)
			}
		})
		return out
	}
	if got := view("25"); len(got[0]) != 0 || len(got[1]) != 1 || got[1][0] != 1 {
		t.Errorf("a share sees cards %v, want none on memonly and card 1 on mixed", got)
	}
	if got := view(""); len(got[0]) != 2 || len(got[1]) != 2 {
		t.Errorf("a memory-only pod sees cards %v, want both on each", got)
	}
}
