package replay

import "testing"

func TestKubeDefaultScore(t *testing.T) {
	empty := hostLoad{allocCPU: 4000, allocMem: 4096}
	loaded := empty
	loaded.add(2000, 0) // 2000 m requested; 200 MiB counted by LeastAllocated
	for _, tc := range []struct {
		name           string
		load           hostLoad
		cpu, mem, want int64
	}{
		// LeastAllocated (75 + 75) / 2 = 75; BalancedAllocation 50 + (50 + 100 − 100) / 2 = 75.
		{"balanced pod on an empty node", empty, 1000, 1024, 150},
		// LeastAllocated (75 + 3896·100/4096 = 95) / 2 = 85, the missing memory counted as
		// 200 MiB; BalancedAllocation sees no memory: fractions .25 and 0, std .125, 87 with
		// the pod against 100 without: 50 + (50 + 87 − 100) / 2 = 68.
		{"no memory request", empty, 1000, 0, 153},
		// Best effort: LeastAllocated (97 + 95) / 2 = 96, no BalancedAllocation.
		{"best effort", empty, 0, 0, 96},
		// LeastAllocated (25 + (4096 − 200 − 1024)·100/4096 = 70) / 2 = 47; BalancedAllocation:
		// with the pod .75 and .25 (std .25, 75), without .5 and 0 (75): 50 + (50 + 0) / 2 = 75.
		{"loaded node", loaded, 1000, 1024, 122},
		// More than the node has: LeastAllocated (0 + 75) / 2 = 37; BalancedAllocation with
		// the cpu fraction capped at 1: std .375, 62: 50 + (50 + 62 − 100) / 2 = 56.
		{"over capacity", empty, 5000, 1024, 93},
	} {
		if got := kubeDefaultScore(tc.load, tc.cpu, tc.mem); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
