package cache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// A pod whose GPU ask is in DRA claims is seen as a pod without gpu-mem; observeClaims moves
// its count to the claims' shape, once, and leaves gpu-mem pods as they were counted.
func TestObserveClaims(t *testing.T) {
	host := policy.Host{CPUMilli: 1000, MemoryMiB: 512}
	four := gpushare.PodRequest{Containers: []gpushare.ContainerRequest{{Kind: gpushare.App, Units: 4, Cards: 1}}}
	eight := gpushare.PodRequest{Containers: []gpushare.ContainerRequest{{Kind: gpushare.App, Units: 8, Cards: 1}}}
	tests := []struct {
		name        string
		seen        *gpushare.PodRequest // observed first (nil: not seen)
		claims      []gpushare.PodRequest
		wantChanged []bool
		want        policy.Workload
	}{
		{
			name: "a claim pod counts as its claims' shape", seen: &gpushare.PodRequest{},
			claims: []gpushare.PodRequest{four}, wantChanged: []bool{true},
			want: policy.Workload{{Cards: 1, PerCard: 4, Host: host, Weight: 1}},
		},
		{
			name: "once per pod", seen: &gpushare.PodRequest{},
			claims: []gpushare.PodRequest{four, eight}, wantChanged: []bool{true, false},
			want: policy.Workload{{Cards: 1, PerCard: 4, Host: host, Weight: 1}},
		},
		{
			name: "a gpu-mem pod keeps its count", seen: &eight,
			claims: []gpushare.PodRequest{four}, wantChanged: []bool{false},
			want: policy.Workload{{Cards: 1, PerCard: 8, Host: host, Weight: 1}},
		},
		{
			name: "claims asking nothing change nothing", seen: &gpushare.PodRequest{},
			claims: []gpushare.PodRequest{{}}, wantChanged: []bool{false},
			want: policy.Workload{{Host: host, Weight: 1}},
		},
		{
			name:   "a pod not seen yet is counted with its host request",
			claims: []gpushare.PodRequest{four}, wantChanged: []bool{true},
			want: policy.Workload{{Cards: 1, PerCard: 4, Host: host, Weight: 1}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newShapeBook()
			uid := types.UID("p")
			if tt.seen != nil {
				s.observe(uid, *tt.seen, host, 0)
				s.observe(uid, *tt.seen, host, 0) // an update: still one pod
			}
			for i, req := range tt.claims {
				if got := s.observeClaims(uid, req, host); got != tt.wantChanged[i] {
					t.Errorf("observeClaims #%d = %v, want %v", i, got, tt.wantChanged[i])
				}
			}
			s.observe(uid, gpushare.PodRequest{}, host, 0) // the object seen after: no second count
			if diff := cmp.Diff(tt.want, s.workload()); diff != "" {
				t.Errorf("workload (-want,+got):\n%s", diff)
			}
		})
	}
}
