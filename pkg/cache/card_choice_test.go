package cache_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// mixedNode has two 16-unit T4s (indexes 0, 1) and two 40-unit A100s (2, 3); card 2 has 36
// units held, so the A100s offer 4 and 40.
func mixedNode(t *testing.T) (*corev1.Node, *corev1.Pod) {
	t.Helper()
	node := ct.NodeWith("mixed",
		gpushare.Device{Index: 0, UUID: "GPU-t4-0", Model: "Tesla T4", Units: 16, Healthy: true},
		gpushare.Device{Index: 1, UUID: "GPU-t4-1", Model: "Tesla T4", Units: 16, Healthy: true},
		gpushare.Device{Index: 2, UUID: "GPU-a100-2", Model: "NVIDIA A100-SXM4-40GB", Units: 40, Healthy: true},
		gpushare.Device{Index: 3, UUID: "GPU-a100-3", Model: "NVIDIA A100-SXM4-40GB", Units: 40, Healthy: true},
	)
	held := ct.Placed(ct.Pod("held", 36), "mixed", gpushare.CardUnits{2: 36})
	return node, held
}

// choosing is a pod asking units on cards cards, with card annotations ann.
func choosing(name string, units, cards int64, ann map[string]string) *corev1.Pod {
	p := ct.Pod(name, units)
	ct.SetGPU(&p.Spec.Containers[0], units, cards)
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	for k, v := range ann {
		p.Annotations[k] = v
	}
	return p
}

// TestCardChoiceInPlacement: on a node with different cards only those the pod's card
// annotations allow count, alike for Fits, PlaceWith, Reserve and ViewEach's scoring, and a
// shortfall names the restriction.
func TestCardChoiceInPlacement(t *testing.T) {
	node, held := mixedNode(t)
	env := ct.Start(t, time.Minute, node, held)
	pol := binpack(t)
	useA100 := map[string]string{gpushare.AnnotationHAMiUseGPUType: "a100"}
	tests := []struct {
		name      string
		pod       *corev1.Pod
		wantCards []int  // the cards Reserve and PlaceWith choose
		wantErr   string // "" = fits
		resolve   bool   // the rejection is resolvable (ChoiceError.Fit set)
	}{
		{name: "no annotations: binpack takes the fullest fitting card", pod: choosing("any", 4, 1, nil), wantCards: []int{2}},
		{name: "use-gputype T4 skips the fuller A100", pod: choosing("t4", 4, 1, map[string]string{gpushare.AnnotationUseGPUType: "T4"}), wantCards: []int{0}},
		{name: "nouse-gputype A100", pod: choosing("no-a100", 4, 1, map[string]string{gpushare.AnnotationHAMiAvoidGPUType: "A100"}), wantCards: []int{0}},
		{name: "use-gpuuuid", pod: choosing("uuid", 4, 1, map[string]string{gpushare.AnnotationUseGPUUUID: "GPU-t4-1"}), wantCards: []int{1}},
		{name: "nouse-gpuuuid", pod: choosing("no-uuid", 4, 1, map[string]string{gpushare.AnnotationHAMiAvoidGPUUUID: "GPU-a100-2"}), wantCards: []int{0}},
		{name: "A100 with room", pod: choosing("a100", 20, 1, useA100), wantCards: []int{3}},
		{
			name: "A100 without room on two cards", pod: choosing("a100x2", 16, 2, useA100),
			wantErr: "no 2 cards of type a100 with 8 free units each (card2 4/40, card3 40/40)", resolve: true,
		},
		{
			name: "T4s too small", pod: choosing("t4-big", 20, 1, map[string]string{gpushare.AnnotationUseGPUType: "T4"}),
			wantErr: "no card of type T4 with 20 free units (card0 16/16, card1 16/16)", resolve: true,
		},
		{
			name: "no card of the type", pod: choosing("h100", 4, 1, map[string]string{gpushare.AnnotationUseGPUType: "H100"}),
			wantErr: "no card of type H100 on this node (its cards: Tesla T4, NVIDIA A100-SXM4-40GB)",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := res.PlacementRequest(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			errs := map[string]error{"Fits": env.Cache.Fits("mixed", req, pol)}
			var pl policy.Placement
			pl, errs["PlaceWith"] = env.Cache.PlaceWith("mixed", req, pol, nil)
			rsv, err := env.Cache.Reserve(context.Background(), "mixed", tc.pod, req, pol)
			errs["Reserve"] = err
			if err == nil {
				env.Cache.Finish(rsv, cache.BindRefused)
			}
			for call, err := range errs {
				got := ""
				if err != nil {
					got = err.Error()
				}
				if got != tc.wantErr {
					t.Errorf("%s = %q, want %q", call, got, tc.wantErr)
				}
				var ce *cache.ChoiceError
				if tc.wantErr != "" && (!errors.As(err, &ce) || (ce.Fit != nil) != tc.resolve) {
					t.Errorf("%s = %#v, want *cache.ChoiceError with Fit set %v", call, err, tc.resolve)
				}
			}
			if tc.wantErr == "" {
				if got := pl.Allocation.Cards(); !slices.Equal(got, tc.wantCards) {
					t.Errorf("PlaceWith cards %v, want %v", got, tc.wantCards)
				}
				if got := rsv.Placement.Allocation.Cards(); !slices.Equal(got, tc.wantCards) {
					t.Errorf("Reserve cards %v, want %v", got, tc.wantCards)
				}
			}
			sc := policy.NewScorer(pol, req, policy.Host{})
			var fits bool
			env.Cache.ViewEach([]string{"mixed"}, req.Choice, func(_ int, n policy.Node) { _, fits = sc.Score(n) })
			if fits != (tc.wantErr == "") {
				t.Errorf("ViewEach scoring fits %v, want %v", fits, tc.wantErr == "")
			}
		})
	}
}

// TestCardChoiceBindRequest: the slim Pod bind reads carries the card choice, and an invalid
// one is an error, while accounting reads the request alone.
func TestCardChoiceBindRequest(t *testing.T) {
	tests := []struct {
		name       string
		ann        map[string]string
		wantChoice bool
		wantErr    bool
	}{
		{name: "none"},
		{name: "use-gputype", ann: map[string]string{gpushare.AnnotationUseGPUType: "A100"}, wantChoice: true},
		{name: "card-policy", ann: map[string]string{gpushare.AnnotationCardPolicy: "spread"}, wantChoice: true},
		{name: "invalid", ann: map[string]string{gpushare.AnnotationCardPolicy: "x"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := cache.NewPod(choosing("p", 4, 1, tc.ann), res)
			req, err := p.Request()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if (req.Choice != nil) != tc.wantChoice {
				t.Fatalf("Choice = %+v, want set %v", req.Choice, tc.wantChoice)
			}
		})
	}
}

// TestForPodCardChoiceConstraints: fgd's typical pods carry their card annotations as they
// carry node affinity: a node with none of the cards a shape allows fails its constraint,
// one with some meets it; the learned workload weighs the shape by the units it can reach.
func TestForPodCardChoiceConstraints(t *testing.T) {
	v100 := func(name string) *corev1.Node {
		return ct.NodeWith(name,
			gpushare.Device{Index: 0, UUID: "GPU-" + name + "-0", Model: "Tesla V100-SXM2-16GB", Units: 16, Healthy: true},
			gpushare.Device{Index: 1, UUID: "GPU-" + name + "-1", Model: "Tesla V100-SXM2-16GB", Units: 16, Healthy: true})
	}
	mixed := ct.NodeWith("mixed",
		gpushare.Device{Index: 0, UUID: "GPU-mixed-0", Model: "Tesla T4", Units: 16, Healthy: true},
		gpushare.Device{Index: 1, UUID: "GPU-mixed-1", Model: "Tesla V100-SXM2-16GB", Units: 16, Healthy: true})
	tests := []struct {
		name string
		ann  map[string]string
		want []bool // Unmet.Has(1) on t4, v100, mixed
	}{
		{name: "use-gputype", ann: map[string]string{gpushare.AnnotationHAMiUseGPUType: "t4"}, want: []bool{false, true, false}},
		{name: "nouse-gputype", ann: map[string]string{gpushare.AnnotationAvoidGPUType: "T4"}, want: []bool{true, false, false}},
		{name: "use-gpuuuid", ann: map[string]string{gpushare.AnnotationUseGPUUUID: "GPU-v100-1"}, want: []bool{true, false, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := requesting(choosing("a", 4, 1, tc.ann), 1000, 512)
			e := ct.StartTracking(t, withHost(ct.Node("t4", 16, 16), 16, 64), withHost(v100("v100"), 16, 64),
				withHost(mixed.DeepCopy(), 16, 64), a, requesting(ct.Pod("b", 4), 1000, 512))
			nodes := []string{"t4", "v100", "mixed"}
			unmet := func() []bool {
				out := make([]bool, len(nodes))
				e.Cache.ViewEach(nodes, nil, func(i int, n policy.Node) { out[i] = n.Unmet.Has(1) })
				return out
			}
			ct.Eventually(t, "card choice numbered as constraint 1", func() bool { return slices.Equal(tc.want, unmet()) })
			// ForPod's rates equal those of fgd with the expected workload: a's shape weighs
			// 0.5 × 96 free / the free units of the nodes meeting it.
			var reach float64
			for _, failed := range tc.want {
				if !failed {
					reach += 32
				}
			}
			host := policy.Host{CPUMilli: 1000, MemoryMiB: 512}
			want := policy.Workload{
				{Cards: 1, PerCard: 4, Host: host, Weight: 0.5},
				{Cards: 1, PerCard: 4, Host: host, Constraint: 1, Weight: 0.5 * 96 / reach},
			}
			req := gpushare.PodRequest{Containers: []gpushare.ContainerRequest{{Kind: gpushare.App, Units: 4, Cards: 1}}}
			rates := func(pol policy.Policy) []float64 {
				sc := policy.NewScorer(pol, req, host)
				out := make([]float64, len(nodes))
				e.Cache.ViewEach(nodes, nil, func(i int, n policy.Node) { out[i], _ = sc.Score(n) })
				return out
			}
			ct.Eventually(t, "workload learned with the card choice", func() bool {
				return slices.Equal(rates(e.Cache.ForPod(fgd(t))), rates(fgd(t).(policy.WorkloadAware).WithWorkload(want, e.Cache.Capacity())))
			})
		})
	}
}
