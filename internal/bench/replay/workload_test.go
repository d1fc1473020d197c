package replay

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func gpuPod(name string, n int, milli int64) PodSpec {
	return PodSpec{Name: name, MilliCPU: 1000, MemoryMiB: 1024, NumGPU: n, GPUMilli: milli}
}

// smallTrace: 12 pods, 6,600 GPU-milli in all (one CPU-only pod).
func smallTrace() []PodSpec {
	var pods []PodSpec
	for i := 0; i < 11; i++ {
		pods = append(pods, gpuPod(fmt.Sprintf("p%02d", i), 1+i%2, 200*int64(1+i%5)))
	}
	pods = append(pods, PodSpec{Name: "cpu", MilliCPU: 500, MemoryMiB: 10})
	return pods
}

func names(pods []PodSpec) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func sum(pods []PodSpec) int64 {
	var t int64
	for _, p := range pods {
		t += p.TotalGPUMilli()
	}
	return t
}

func TestWorkloadTuneUp(t *testing.T) {
	trace := smallTrace()
	before := append([]PodSpec(nil), trace...)
	const capacity = 8000 // target 1.3 × 8000 = 10400 > 6600 in the trace
	got, st, err := buildWorkload(trace, capacity, 42, 1.3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, trace); diff != "" {
		t.Fatalf("input modified (-want,+got):\n%s", diff)
	}
	// The first len(trace) pods are the trace, shuffled.
	orig := names(got[:len(trace)])
	sorted := append([]string(nil), orig...)
	sort.Strings(sorted)
	if diff := cmp.Diff(names(sortedByName(trace)), sorted); diff != "" {
		t.Fatalf("head is not a permutation of the trace (-want,+got):\n%s", diff)
	}
	if cmp.Equal(orig, names(sortedByName(trace))) {
		t.Errorf("not shuffled: %v", orig)
	}
	// Then clones "<name>-tuned-<i>", i = 0, 1, 2, ...
	total := sum(trace)
	for i, c := range got[len(trace):] {
		base, idx, ok := strings.Cut(c.Name, "-tuned-")
		if !ok || idx != fmt.Sprint(i) {
			t.Fatalf("clone %d is named %q", i, c.Name)
		}
		src := findPod(trace, base)
		if src == nil || src.TotalGPUMilli() != c.TotalGPUMilli() || src.MilliCPU != c.MilliCPU {
			t.Fatalf("clone %q does not copy a trace pod", c.Name)
		}
		// The simulator's check: total so far + the clone's per-card milli fits the target.
		if float64(total+c.GPUMilli) > 1.3*capacity {
			t.Fatalf("clone %q added past the target: %d + %d > %v", c.Name, total, c.GPUMilli, 1.3*capacity)
		}
		total += c.TotalGPUMilli()
	}
	if st.Clones != len(got)-len(trace) || st.RequestMilli != total || st.Removed != 0 {
		t.Errorf("stats = %+v, want %d clones and request %d", st, len(got)-len(trace), total)
	}
	// It stopped because a drawn pod (at most 1000 per card) would have crossed the target.
	if float64(total+1000) <= 1.3*capacity {
		t.Errorf("stopped early at %d of target %v", total, 1.3*capacity)
	}
}

func sortedByName(p []PodSpec) []PodSpec {
	out := append([]PodSpec(nil), p...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func findPod(pods []PodSpec, name string) *PodSpec {
	for i := range pods {
		if pods[i].Name == name {
			return &pods[i]
		}
	}
	return nil
}

func TestWorkloadTuneDown(t *testing.T) {
	trace := smallTrace()
	const capacity = 4000 // target 1.3 × 4000 = 5200 < 6600
	got, st, err := buildWorkload(trace, capacity, 7, 1.3)
	if err != nil {
		t.Fatal(err)
	}
	if total := sum(got); float64(total) > 5200 || total != st.RequestMilli {
		t.Errorf("total %d (stats %d), want ≤ 5200", total, st.RequestMilli)
	}
	if st.Removed == 0 || st.Removed != len(trace)-len(got) || st.Clones != 0 {
		t.Errorf("stats = %+v with %d of %d pods left", st, len(got), len(trace))
	}
	for _, p := range got {
		if findPod(trace, p.Name) == nil {
			t.Errorf("pod %q is not from the trace", p.Name)
		}
	}
}

func TestWorkloadDeterministic(t *testing.T) {
	trace := smallTrace()
	a, _, _ := buildWorkload(trace, 8000, 42, 1.3)
	b, _, _ := buildWorkload(trace, 8000, 42, 1.3)
	c, _, _ := buildWorkload(trace, 8000, 43, 1.3)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different workloads (-first,+second):\n%s", diff)
	}
	if cmp.Equal(names(a), names(c)) {
		t.Errorf("seeds 42 and 43 gave the same order")
	}
}

func TestWorkloadNoTune(t *testing.T) {
	trace := smallTrace()
	got, st, err := buildWorkload(trace, 8000, 42, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(trace) || st.Clones != 0 || st.Removed != 0 || st.RequestMilli != sum(trace) {
		t.Errorf("tune 0 changed the workload: %d pods, %+v", len(got), st)
	}
}

func TestWorkloadErrors(t *testing.T) {
	tests := []struct {
		name     string
		pods     []PodSpec
		capacity int64
		want     string
	}{
		{"no pods", nil, 1000, "the trace has no pods"},
		{"no GPU request", []PodSpec{{Name: "c", MilliCPU: 1}}, 1000, "the trace requests no GPU"},
		{"no capacity", smallTrace(), 0, "cluster GPU capacity 0 is not positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := buildWorkload(tc.pods, tc.capacity, 42, 1.3)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestWorkloadSampleTrace pins the seed-42 workload of the openb sample: the order comes
// from math/rand's seeded generator (stable under the Go 1 compatibility promise, the same
// generator the FGD simulator uses), so a change here means the replay no longer mirrors
// the simulator's order.
func TestWorkloadSampleTrace(t *testing.T) {
	nodes, trace := sampleNodes(t), samplePods(t, "gpuspec25")
	got, st, err := buildWorkload(trace, totalGPUMilli(nodes), 42, 1.3)
	if err != nil {
		t.Fatal(err)
	}
	type pin struct {
		First   []string
		Last    string
		Pods    int
		Request int64
	}
	// 300 sample pods + 180 clones; 407,920 ≤ 1.3 × 314,000.
	want := pin{First: []string{"openb-pod-7614", "openb-pod-0810"}, Last: "openb-pod-4698-tuned-179", Pods: 480, Request: 407920}
	gotPin := pin{First: names(got[:2]), Last: got[len(got)-1].Name, Pods: len(got), Request: st.RequestMilli}
	if diff := cmp.Diff(want, gotPin); diff != "" {
		t.Errorf("seed-42 workload (-want,+got):\n%s", diff)
	}
	// The sample requests 257,800 GPU-milli; clones fill it up to 1.3 × 314,000 = 408,200
	// less than one pod.
	if st.Clones != len(got)-len(trace) || st.RequestMilli > 408200 || st.RequestMilli+1000 <= 408200 {
		t.Errorf("stats %+v: want the clones to fill 257800 up to 408200 within one pod", st)
	}
}

func TestCutAtArrived(t *testing.T) {
	pods := []PodSpec{
		{Name: "a", NumGPU: 1, GPUMilli: 500},
		{Name: "b", NumGPU: 2, GPUMilli: 1000},
		{Name: "c", NumGPU: 0, GPUMilli: 0},
		{Name: "d", NumGPU: 1, GPUMilli: 1000},
	}
	for _, tc := range []struct {
		name     string
		capacity int64
		pct      float64
		want     int
	}{
		{"reached exactly at b", 2500, 100, 2},
		{"crossed at b", 2000, 100, 2},
		{"first pod", 1000, 50, 1},
		{"never reached", 10000, 100, 4},
		{"130 percent reached at d", 2000, 130, 4},
		{"cpu pod does not end it", 3000, 85, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cutAtArrived(pods, tc.capacity, tc.pct); len(got) != tc.want {
				t.Errorf("CutAtArrived(cap %d, %.0f%%) kept %d pods, want %d", tc.capacity, tc.pct, len(got), tc.want)
			}
		})
	}
}
