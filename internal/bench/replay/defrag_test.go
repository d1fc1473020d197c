package replay

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/policy"
)

// TestOfflineDefrag: spread puts two half-card pods on two one-card nodes, so a whole-card
// pod fits nowhere; the defragmenter moves one of them beside the other and places it, one
// eviction, and gives up where the move has nowhere to go or the budget is too small.
func TestOfflineDefrag(t *testing.T) {
	nodes := []NodeSpec{
		{Name: "n0", MilliCPU: 4000, MemoryMiB: 4096, GPUs: 1, Model: "T4"},
		{Name: "n1", MilliCPU: 4000, MemoryMiB: 4096, GPUs: 1, Model: "T4"},
	}
	for _, tc := range []struct {
		name      string
		budget    int
		pods      []PodSpec
		want      []string
		evictions int
	}{
		{"none", 0, []PodSpec{gpuPod("a", 1, 500), gpuPod("b", 1, 500), gpuPod("c", 1, 1000)}, []string{"a@n0", "b@n1", "c@"}, 0},
		{"one move", 1, []PodSpec{gpuPod("a", 1, 500), gpuPod("b", 1, 500), gpuPod("c", 1, 1000)}, []string{"a@n0", "b@n1", "c@n0"}, 1},
		// The moved pod does not fit beside the other: nothing changes.
		{"nowhere to go", 1, []PodSpec{gpuPod("a", 1, 600), gpuPod("b", 1, 600), gpuPod("c", 1, 1000)}, []string{"a@n0", "b@n1", "c@"}, 0},
		// Freeing a card takes two moves.
		{"over budget", 1, []PodSpec{gpuPod("a", 1, 300), gpuPod("b", 1, 300), gpuPod("x", 1, 200), gpuPod("y", 1, 200), gpuPod("c", 1, 1000)},
			[]string{"a@n0", "b@n1", "x@n0", "y@n1", "c@"}, 0},
		{"two moves", 2, []PodSpec{gpuPod("a", 1, 300), gpuPod("b", 1, 300), gpuPod("x", 1, 200), gpuPod("y", 1, 200), gpuPod("c", 1, 1000)},
			[]string{"a@n0", "b@n1", "x@n0", "y@n1", "c@n0"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, rec := replayPlacements(t, "spread", offlineConfig{Defrag: tc.budget}, nodes, tc.pods)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("placements (-want,+got):\n%s", diff)
			}
			if rec.evictions != tc.evictions {
				t.Errorf("evictions = %d, want %d", rec.evictions, tc.evictions)
			}
		})
	}
}

// TestOfflineDefragRefusesDRA: the defragmenter moves device-plugin placements only.
func TestOfflineDefragRefusesDRA(t *testing.T) {
	pol, _ := policy.New("binpack")
	if _, _, err := newOffline(offlineConfig{Policy: pol, DRA: DRAGPUShare, Defrag: 2}, nil); err == nil {
		t.Error("a defragmenter on the DRA path was accepted")
	}
	if _, _, err := newOffline(offlineConfig{Policy: pol, Defrag: -1}, nil); err == nil {
		t.Error("a negative budget was accepted")
	}
}
