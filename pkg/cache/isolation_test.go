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
