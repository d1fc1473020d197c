package binding_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gpushare/gpushare/pkg/binding"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
	"github.com/gpushare/gpushare/pkg/reasons"
)

// ReserveFailed words each refusal of cache.Reserve as filter words it for the node, and
// labels it with the metrics reason; only a pod already placed on the node asked is bound.
func TestReserveFailedWordsEachRefusal(t *testing.T) {
	choice, err := gpushare.ParseCardChoice(map[string]string{gpushare.AnnotationUseGPUType: "A100"})
	if err != nil {
		t.Fatal(err)
	}
	fit := &policy.FitError{Requested: 20, Cards: 1, LargestFree: 16, Free: []policy.CardFree{{Index: 0, Free: 16, Total: 16}}}
	other := errors.New("policy broke")
	tests := []struct {
		name      string
		err       error
		wantLabel string // "": ReserveFailed answers nil
		wantMsg   string
		wantWraps error // errors.Is must still find it
	}{
		{name: "already placed on this node: bound", err: &cache.AlreadyPlacedError{Node: "n1"}},
		{
			name: "already placed on another node: no_fit", err: &cache.AlreadyPlacedError{Node: "n2"},
			wantLabel: metrics.BindNoFit, wantMsg: "choosing cards for pod default/p on n1: pod already holds cards on node n2",
		},
		{
			name: "held on another node: held_elsewhere", err: &cache.HeldElsewhereError{Node: "n2"},
			wantLabel: metrics.BindHeldElsewhere,
			wantMsg:   "binding pod default/p to n1: pod holds cards on node n2 for an earlier bind whose Binding may still land",
		},
		{
			name: "earlier Binding in flight: in_flight", err: fmt.Errorf("waiting: %w", cache.ErrBindInFlight),
			wantLabel: metrics.BindInFlight, wantWraps: cache.ErrBindInFlight,
			wantMsg: "binding pod default/p to n1: waiting: an earlier Binding of the pod is still in flight; retry later",
		},
		{
			name: "unknown node: node_unfit, in filter's words", err: cache.ErrUnknownNode,
			wantLabel: metrics.BindNodeUnfit, wantMsg: "binding pod default/p to n1: not a gpushare node (no cgpu=true label or no gpu-mem)",
		},
		{
			name: "node without cards: node_unfit, in filter's words", err: cache.ErrNoCards,
			wantLabel: metrics.BindNodeUnfit, wantMsg: "binding pod default/p to n1: not a gpushare node (no cgpu=true label or no gpu-mem)",
		},
		{
			name: "isolation refuses: node_unfit", err: &cache.IsolationError{Err: errors.New("node isolates cards with MPS")},
			wantLabel: metrics.BindNodeUnfit, wantMsg: "binding pod default/p to n1: node isolates cards with MPS",
		},
		{
			name: "inventory out of range: node_unfit", err: &cache.InventoryError{Err: errors.New("card 0 units 9 out of range 0..1")},
			wantLabel: metrics.BindNodeUnfit,
			wantMsg:   "binding pod default/p to n1: node's GPU inventory is out of range, it takes no GPU pod until fixed: card 0 units 9 out of range 0..1",
		},
		{
			name: "cards too small: no_fit, in filter's words", err: fmt.Errorf("placing: %w", fit),
			wantLabel: metrics.BindNoFit, wantMsg: "choosing cards for pod default/p on n1: gpu-mem: need 20 on one card; largest free 16 (card0 16/16)",
		},
		{
			name: "no card of the chosen type: no_fit, in filter's words", err: &cache.ChoiceError{Choice: choice, Models: []string{"Tesla T4"}},
			wantLabel: metrics.BindNoFit, wantMsg: "choosing cards for pod default/p on n1: gpu-mem: no card of type A100 on this node (its cards: Tesla T4)",
		},
		{
			name: "any other error: no_fit, as it is", err: other,
			wantLabel: metrics.BindNoFit, wantMsg: "choosing cards for pod default/p on n1: policy broke", wantWraps: other,
		},
	}
	b := &binding.Binder{Wording: reasons.NewWording(res, "cgpu=true")}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := b.ReserveFailed(pod("p", 20, 0), "n1", tc.err)
			if tc.wantLabel == "" {
				if err != nil {
					t.Fatalf("ReserveFailed: %v, want nil", err)
				}
				return
			}
			be := asError(t, err)
			if be.Label != tc.wantLabel || err.Error() != tc.wantMsg {
				t.Errorf("ReserveFailed: %q label %q,\nwant %q label %q", err, be.Label, tc.wantMsg, tc.wantLabel)
			}
			if tc.wantWraps != nil && !errors.Is(err, tc.wantWraps) {
				t.Errorf("ReserveFailed's error does not wrap %v", tc.wantWraps)
			}
		})
	}
}

// Bind answers a refusal of the real ledger through ReserveFailed, before any write.
func TestBindRefusedByTheLedgerWritesNothing(t *testing.T) {
	tests := []struct {
		name      string
		pod       *corev1.Pod
		objs      []*corev1.Pod
		before    string // a node an earlier bind of the pod went to, with an unknown outcome
		node      string
		wantLabel string // "": Bind succeeds
		wantMsg   string
	}{
		{
			name: "unknown node", pod: pod("p", 6, 0), node: "nowhere",
			wantLabel: metrics.BindNodeUnfit, wantMsg: "binding pod default/p to nowhere: not a gpushare node (no cgpu=true label or no gpu-mem)",
		},
		{
			name: "too big for any card", pod: pod("p", 20, 0), node: "n1",
			wantLabel: metrics.BindNoFit, wantMsg: "choosing cards for pod default/p on n1: gpu-mem: need 20 on one card; largest free 16 (card0 16/16)",
		},
		{
			// The informer saw the bind land before the scheduler's retry: bound, no second write.
			name: "already placed on this node", pod: placed(pod("p", 6, 0), "n1", gpushare.CardUnits{0: 6}), node: "n1",
		},
		{
			name: "held on another node by an earlier bind", pod: pod("p", 6, 0), before: "n2", node: "n1",
			wantLabel: metrics.BindHeldElsewhere,
			wantMsg:   "binding pod default/p to n1: pod holds cards on node n2 for an earlier bind whose Binding may still land",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &api{}
			if tc.before != "" {
				a.bindErrs = []error{apierrors.NewServerTimeout(podsGVR.GroupResource(), "create", 1)}
			}
			e := newEnv(t, a, node("n1", 16), node("n2", 16), tc.pod)
			if tc.before != "" {
				if err := e.bind(context.Background(), t, tc.pod, tc.before); err == nil {
					t.Fatal("the earlier bind succeeded, want an unknown outcome")
				}
			}
			sent := len(e.bindings())
			err := e.bind(context.Background(), t, tc.pod, tc.node)
			if tc.wantLabel == "" {
				if err != nil {
					t.Fatalf("Bind: %v", err)
				}
			} else if be := asError(t, err); be.Label != tc.wantLabel || err.Error() != tc.wantMsg {
				t.Errorf("Bind: %q label %q,\nwant %q label %q", err, be.Label, tc.wantMsg, tc.wantLabel)
			}
			if n := len(e.bindings()) - sent; n != 0 {
				t.Errorf("%d Bindings sent, want none", n)
			}
			if node, held := e.cache.HeldOn(tc.pod.UID); held && node != tc.before {
				t.Errorf("cards held on %s, want none held by this bind", node)
			}
		})
	}
}
