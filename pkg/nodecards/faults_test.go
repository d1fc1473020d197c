package nodecards

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

func TestFaultLog(t *testing.T) {
	tests := []struct {
		name   string
		faults []gpunvml.Fault
		want   map[string]uint64
	}{
		{name: "none", want: map[string]uint64{}},
		{name: "one card", faults: []gpunvml.Fault{{UUID: "GPU-b", XID: 48}}, want: map[string]uint64{"GPU-b": 48}},
		{name: "the latest wins", faults: []gpunvml.Fault{{UUID: "GPU-a", XID: 79}, {UUID: "GPU-a", XID: 48}}, want: map[string]uint64{"GPU-a": 48}},
		{name: "an unnamed card is every card", faults: []gpunvml.Fault{{XID: 79}}, want: map[string]uint64{"GPU-a": 79, "GPU-b": 79}},
		{name: "a card not ours", faults: []gpunvml.Fault{{UUID: "GPU-z", XID: 79}}, want: map[string]uint64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			l := NewFaultLog([]string{"GPU-a", "GPU-b"})
			in, out := make(chan gpunvml.Fault), make(chan gpunvml.Fault)
			done := make(chan struct{})
			go func() { defer close(done); l.Relay(ctx, in, out) }()
			for _, f := range tt.faults {
				in <- f
				if got := <-out; got != f {
					t.Errorf("forwarded %+v, want %+v", got, f)
				}
			}
			cancel()
			<-done
			if diff := cmp.Diff(tt.want, l.Snapshot()); diff != "" {
				t.Errorf("latest XIDs (-want +got):\n%s", diff)
			}
		})
	}
}
