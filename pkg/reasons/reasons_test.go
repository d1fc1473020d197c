package reasons

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/metrics"
	"github.com/gpushare/gpushare/pkg/policy"
)

// TestReject: both front ends word a node's rejection from the ledger's error alike, with
// the metric label and whether preemption could help.
func TestReject(t *testing.T) {
	r := NewWording(gpushare.DefaultResources(), "cgpu=true")
	fit := &policy.FitError{Requested: 10, Cards: 1, LargestFree: 8}
	a100, err := gpushare.ParseCardChoice(map[string]string{gpushare.AnnotationHAMiUseGPUType: "A100"})
	if err != nil {
		t.Fatal(err)
	}
	choiceFit := &policy.FitError{Requested: 8, Cards: 1, LargestFree: 4, Free: []policy.CardFree{{Index: 2, Free: 4, Total: 40}}}
	tests := []struct {
		name string
		err  error
		want Rejection
	}{
		{"unknown node", cache.ErrUnknownNode,
			Rejection{Reason: "not a gpushare node (no cgpu=true label or no gpu-mem)", Label: metrics.RejectUnknownNode}},
		{"no cards", fmt.Errorf("wrapped: %w", cache.ErrNoCards),
			Rejection{Reason: "not a gpushare node (no cgpu=true label or no gpu-mem)", Label: metrics.RejectNoCards}},
		{"card shortfall", fit,
			Rejection{Reason: "gpu-mem: " + fit.Error(), Label: metrics.RejectCardShortfall, Resolvable: true}},
		{"isolation", fmt.Errorf("wrapped: %w", &cache.IsolationError{Err: errors.New("node isolates cards with MPS")}),
			Rejection{Reason: "node isolates cards with MPS", Label: metrics.RejectIsolation}},
		{"inventory out of range", fmt.Errorf("wrapped: %w", &cache.InventoryError{Err: &gpushare.RangeError{What: "card 0 units", Value: 1 << 40, Max: 1 << 32}}),
			Rejection{Reason: "node's GPU inventory is out of range, it takes no GPU pod until fixed: card 0 units 1099511627776 out of range 0..4294967296",
				Label: metrics.RejectInventory}},
		{"card choice shortfall", &cache.ChoiceError{Choice: a100, Fit: choiceFit},
			Rejection{Reason: "gpu-mem: no card of type A100 with 8 free units (card2 4/40)", Label: metrics.RejectCardShortfall, Resolvable: true}},
		{"no card of the chosen type", &cache.ChoiceError{Choice: a100, Models: []string{"Tesla T4"}},
			Rejection{Reason: "gpu-mem: no card of type A100 on this node (its cards: Tesla T4)", Label: metrics.RejectCardShortfall}},
		{"anything else", errors.New("odd"),
			Rejection{Reason: "gpu-mem: odd", Label: metrics.RejectCardShortfall, Resolvable: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := r.Reject(tc.err); got != tc.want {
				t.Fatalf("Reject = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestShortName(t *testing.T) {
	for in, want := range map[string]string{"aliyun.com/gpu-mem": "gpu-mem", "gpu-mem": "gpu-mem", "a/b/c": "c"} {
		if got := ShortName(in); got != want {
			t.Errorf("ShortName(%q) = %q, want %q", in, got, want)
		}
	}
}
