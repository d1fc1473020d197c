package scale

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func phaseAt(name string, podsPerSecond float64) PhaseResult {
	return PhaseResult{Name: name, Pods: 100, Seconds: 100 / podsPerSecond, PodsPerSecond: podsPerSecond,
		SchedulerCPUSeconds: 1, APIServerCPUSeconds: 0.5}
}

// TestDRAMarkdown: the DRA mode's ratios, per round with their median, and the claims'
// verdict; the other modes' a/b rows stay out of it.
func TestDRAMarkdown(t *testing.T) {
	ok, over := ClaimCheck{Claims: 100, Over: []string{}, Unallocated: []string{}, Mismatched: []string{}},
		ClaimCheck{Claims: 100, Over: []string{"n/gpu-0: 17 > 16"}, Unallocated: []string{}, Mismatched: []string{}}
	tests := []struct {
		name   string
		rounds [][4]float64 // plain, dra, plugin, dra-plugin pods/s (0: not run)
		claims ClaimCheck
		want   []string
		absent []string
	}{
		{
			name:   "one run with phase c",
			rounds: [][4]float64{{100, 20, 80, 30}},
			claims: ok,
			want: []string{
				"| a/b: DRA via kube-scheduler / gpu-mem via gpushare-scheduler | 0.25 |",
				"| a/ref: DRA / gpu-mem, both via kube-scheduler alone | 0.20 |",
				"| c/a: DRA via gpushare-scheduler / via kube-scheduler | 1.50 |",
				"ref 10.0 + 5.0; a 10.0 + 5.0; b 10.0 + 5.0; c 10.0 + 5.0",
				"| 0 / 0 / 0 (100 claims on 0 nodes) | 0 / 0 / 0 | met |",
			},
			absent: []string{"b/a (plugin"},
		},
		{
			name:   "rounds give the median, no phase c",
			rounds: [][4]float64{{100, 20, 80, 0}, {100, 30, 60, 0}, {100, 10, 100, 0}},
			claims: over,
			want: []string{
				"0.25, 0.50, 0.10: **median 0.25** (3 alternating rounds)",
				"0.20, 0.30, 0.10: **median 0.20** (3 alternating rounds)",
				"| 1 / 0 / 0 (100 claims on 0 nodes) | 0 / 0 / 0 | **missed** |",
			},
			absent: []string{"c/a", "c) gpushare-scheduler"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(sub string, r [4]float64) {
				for i, name := range []string{FilePlain, FileDRA, FilePlugin, FileDRAPlugin} {
					if r[i] == 0 {
						continue
					}
					p := phaseAt(name, r[i])
					if name == FileDRA || name == FileDRAPlugin {
						p.Claims = &tc.claims
					}
					if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := WriteJSON(filepath.Join(dir, sub, name), p); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i, r := range tc.rounds {
				if len(tc.rounds) > 1 {
					write(fmt.Sprintf("%s%d", RoundDirPrefix, i+1), r)
				}
			}
			write("", tc.rounds[len(tc.rounds)-1])
			r, err := LoadResults(dir)
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, r.Markdown(), tc.want, tc.absent)
		})
	}
}
