package cache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	ct "github.com/gpushare/gpushare/pkg/cache/cachetest"
	"github.com/gpushare/gpushare/pkg/gpushare"
)

// isolated is a 2x16 node whose isolation label is mode ("" leaves it unlabelled).
func isolated(name, mode string) *corev1.Node {
	n := ct.Node(name, 16, 16)
	if mode != "" {
		n.Labels[gpushare.LabelIsolation] = mode
	}
	return n
}

// TestIsolationInFit: an MPS node takes one card per container and refuses a container on
// two cards whatever room it has; a node with an invalid isolation label takes no GPU pod
// (fail closed, naming the label); Fits, Reserve and PlaceWith agree, with *IsolationError.
func TestIsolationInFit(t *testing.T) {
	env := ct.Start(t, time.Minute, isolated("mps", "mps"), isolated("none", "none"),
		isolated("plain", ""), isolated("typo", "MPS"))
	pol := binpack(t)
	two := ct.Pod("two", 16)
	ct.SetGPU(&two.Spec.Containers[0], 16, 2) // 8 units on each of 2 cards
	const (
		mpsRefusal = `node isolates cards with MPS (gpushare.io/isolation=mps): one card per container, and container "main" asks for 2`
		typo       = `node refuses GPU pods until its isolation label is fixed: node label gpushare.io/isolation="MPS": want none, mps or limit`
	)
	tests := []struct {
		name, node string
		pod        *corev1.Pod
		want       string // "" = fits
	}{
		{"mps: one card fits", "mps", ct.Pod("one", 8), ""},
		{"mps: two cards refused", "mps", two, mpsRefusal},
		{"none: two cards fit", "none", two, ""},
		{"unlabelled: two cards fit", "plain", two, ""},
		{"invalid label: one card refused", "typo", ct.Pod("one", 8), typo},
		{"invalid label: two cards refused", "typo", two, typo},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := request(t, tc.pod)
			errs := map[string]error{"Fits": env.Cache.Fits(tc.node, req, pol)}
			_, errs["PlaceWith"] = env.Cache.PlaceWith(tc.node, req, pol, nil)
			rsv, err := env.Cache.Reserve(context.Background(), tc.node, tc.pod, req, pol)
			errs["Reserve"] = err
			if err == nil {
				env.Cache.Finish(rsv, cache.BindRefused) // free the cards for the next case
			}
			for call, err := range errs {
				got := ""
				if err != nil {
					got = err.Error()
				}
				if got != tc.want {
					t.Errorf("%s(%s) = %q, want %q", call, tc.node, got, tc.want)
				}
				var iso *cache.IsolationError
				if tc.want != "" && !errors.As(err, &iso) {
					t.Errorf("%s(%s) = %T, want *cache.IsolationError", call, tc.node, err)
				}
			}
		})
	}
}

// TestIsolationLabelChangeApplies: relabelling a node changes what it admits without a
// restart, both ways.
func TestIsolationLabelChangeApplies(t *testing.T) {
	env := ct.Start(t, time.Minute, isolated("n1", ""))
	pol := binpack(t)
	two := ct.Pod("two", 16)
	ct.SetGPU(&two.Spec.Containers[0], 16, 2)
	req := request(t, two)
	if err := env.Cache.Fits("n1", req, pol); err != nil {
		t.Fatalf("unlabelled: %v", err)
	}
	for _, step := range []struct {
		mode string
		want string // "" = fits
	}{
		{"mps", `node isolates cards with MPS (gpushare.io/isolation=mps): one card per container, and container "main" asks for 2`},
		{"oops", `node refuses GPU pods until its isolation label is fixed: node label gpushare.io/isolation="oops": want none, mps or limit`},
		{"none", ""},
	} {
		if _, err := env.Client.CoreV1().Nodes().Update(context.Background(), isolated("n1", step.mode), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		ct.Eventually(t, "isolation="+step.mode+" applied", func() bool {
			err := env.Cache.Fits("n1", req, pol)
			return (err == nil && step.want == "") || (err != nil && err.Error() == step.want)
		})
	}
}

// TestMemLimitInFit: a container with a memory limit above its request fits only a node
// labelled limit whose largest card holds the limit per card; elsewhere every call refuses it
// with *IsolationError naming the annotation. The request is what the node's cards are
// checked against: a limit larger than the free room still fits.
func TestMemLimitInFit(t *testing.T) {
	env := ct.Start(t, time.Minute, isolated("limit", "limit"), isolated("none", "none"), isolated("mps", "mps"))
	pol := binpack(t)
	burst := func(name, limit string) *corev1.Pod {
		p := ct.Pod(name, 4)
		p.Annotations = map[string]string{gpushare.AnnotationMemLimit: "main=" + limit}
		return p
	}
	const notEnforced = `container "main" has a GPU-memory limit (gpushare.io/gpu-mem-limit: 12 above its request 4), which only nodes labelled gpushare.io/isolation=limit enforce, and this node is `
	tests := []struct {
		name, node string
		pod        *corev1.Pod
		want       string // "" = fits
	}{
		{"limit: fits", "limit", burst("b", "12"), ""},
		{"limit: a limit of the whole card fits", "limit", burst("b", "16"), ""},
		{"limit: above the largest card", "limit", burst("b", "17"),
			`container "main" has a GPU-memory limit of 17 units per card (gpushare.io/gpu-mem-limit), above this node's largest card (16 units)`},
		{"none: refused", "none", burst("b", "12"), notEnforced + "none"},
		{"mps: refused", "mps", burst("b", "12"), notEnforced + "mps"},
		{"none: no limit fits", "none", ct.Pod("plain", 4), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := gpushare.DefaultResources().PlacementRequest(tc.pod)
			if err != nil {
				t.Fatal(err)
			}
			errs := map[string]error{"Fits": env.Cache.Fits(tc.node, req, pol)}
			_, errs["PlaceWith"] = env.Cache.PlaceWith(tc.node, req, pol, nil)
			rsv, err := env.Cache.Reserve(context.Background(), tc.node, tc.pod, req, pol)
			errs["Reserve"] = err
			if err == nil {
				env.Cache.Finish(rsv, cache.BindRefused)
			}
			for call, err := range errs {
				got := ""
				if err != nil {
					got = err.Error()
				}
				if got != tc.want {
					t.Errorf("%s(%s) = %q, want %q", call, tc.node, got, tc.want)
				}
				var iso *cache.IsolationError
				if tc.want != "" && !errors.As(err, &iso) {
					t.Errorf("%s(%s) = %T, want *cache.IsolationError", call, tc.node, err)
				}
			}
		})
	}
}

// TestMemLimitNotCounted: the ledger counts a limited pod's request, never its limit: four
// pods of 4 units with limits of 16 take one 16-unit card between them, and a 16-unit pod
// still fits the other.
func TestMemLimitNotCounted(t *testing.T) {
	env := ct.Start(t, time.Minute, isolated("limit", "limit"))
	pol := binpack(t)
	for i := range 4 {
		p := ct.Pod("b"+string(rune('0'+i)), 4)
		p.Annotations = map[string]string{gpushare.AnnotationMemLimit: "main=16"}
		req, err := gpushare.DefaultResources().PlacementRequest(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Cache.Reserve(context.Background(), "limit", p, req, pol); err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
	}
	if err := env.Cache.Fits("limit", request(t, ct.Pod("whole", 16)), pol); err != nil {
		t.Fatalf("a whole card after four limited pods: %v", err)
	}
	if err := env.Cache.Fits("limit", request(t, ct.Pod("more", 17)), pol); err == nil {
		t.Fatal("17 units fit a 16-unit card")
	}
}
