package nodecards

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// TestHealthQuietPeriod: a fault makes its card (every card, for a fault without a UUID)
// unhealthy, and the card recovers once the quiet period passed since its latest fault, not
// a second earlier.
func TestHealthQuietPeriod(t *testing.T) {
	cards := []gpushare.Device{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}}
	tests := []struct {
		name        string
		fault       gpunvml.Fault
		wantHealthy map[string]bool // after the fault, before recovery
	}{
		{name: "one card", fault: gpunvml.Fault{UUID: "GPU-b", XID: 79}, wantHealthy: map[string]bool{"GPU-a": true, "GPU-b": false}},
		{name: "unnamed card", fault: gpunvml.Fault{XID: 79}, wantHealthy: map[string]bool{"GPU-a": false, "GPU-b": false}},
		{name: "a card not ours", fault: gpunvml.Fault{UUID: "GPU-z", XID: 79}, wantHealthy: map[string]bool{"GPU-a": true, "GPU-b": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			h := NewHealth(clk, time.Minute, cards)
			changed := h.fault(tt.fault)
			for uuid, want := range tt.wantHealthy {
				if got := h.Healthy(uuid); got != want {
					t.Errorf("%s healthy after the fault: %v, want %v", uuid, got, want)
				}
			}
			anyFaulty := !tt.wantHealthy["GPU-a"] || !tt.wantHealthy["GPU-b"]
			if changed != anyFaulty {
				t.Errorf("fault reported a change %v, want %v", changed, anyFaulty)
			}
			if h.fault(tt.fault) {
				t.Error("the same fault again reported a change")
			}
			clk.Step(59 * time.Second)
			if changed, next := h.recover(); changed || (anyFaulty && next != time.Second) {
				t.Errorf("recover at 59s = %v, %v; want no change, next in 1s", changed, next)
			}
			clk.Step(time.Second)
			if changed, next := h.recover(); changed != anyFaulty || next != 0 {
				t.Errorf("recover at 60s = %v, %v; want change %v, nothing pending", changed, next, anyFaulty)
			}
			if !h.Healthy("GPU-a") || !h.Healthy("GPU-b") {
				t.Error("a card is still unhealthy after the quiet period")
			}
		})
	}
}
