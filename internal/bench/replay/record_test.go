package replay

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRecorder(t *testing.T) {
	rec := newRecorder(4000) // 4 cards
	// arrived 1000 (25%), allocated 1000
	rec.Record(gpuPod("a", 1, 1000), "n1")
	// arrived 3000 (75%), b failed
	rec.RecordReason(gpuPod("b", 2, 1000), "", "0/2 nodes are available: 2 Insufficient cpu")
	// a CPU-only pod moves nothing
	rec.Record(PodSpec{Name: "c", MilliCPU: 1}, "n2")
	if _, ok := rec.UnallocatedAt100(); ok {
		t.Fatalf("reported unallocated before arrival reached 100%%")
	}
	// arrived 3500 (87.5%), allocated 1500
	rec.Record(gpuPod("d", 1, 500), "n1")
	// arrived 4500 (112.5%): crosses 100% here; allocated 2500 (62.5%) → unallocated 37.5%
	rec.Record(gpuPod("e", 1, 1000), "n3")
	got, ok := rec.UnallocatedAt100()
	if !ok || got != 37.5 {
		t.Errorf("unallocated at 100%% = %v, %v; want 37.5", got, ok)
	}
	// later steps do not move the 100% figure
	rec.Record(gpuPod("f", 1, 1000), "")
	if got, _ := rec.UnallocatedAt100(); got != 37.5 {
		t.Errorf("unallocated at 100%% moved to %v after the crossing", got)
	}
	if rec.Bound() != 4 || rec.Failed() != 2 {
		t.Errorf("bound %d failed %d, want 4, 2", rec.Bound(), rec.Failed())
	}

	var buf bytes.Buffer
	if err := rec.WriteSteps(&buf, 2); err != nil {
		t.Fatal(err)
	}
	// every 2nd step (2, 4, 6), plus step 5 (crossed 100%); 6 is also the last.
	want := `step,pod,num_gpu,gpu_milli,node,arrived_pct,allocated_pct,failed_pods,reason
2,b,2,1000,,75.0000,25.0000,1,0/2 nodes are available: 2 Insufficient cpu
4,d,1,500,n1,87.5000,37.5000,1,
5,e,1,1000,n3,112.5000,62.5000,1,
6,f,1,1000,,137.5000,62.5000,2,
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("steps.csv (-want,+got):\n%s", diff)
	}

	s := newSummary(rec, 2*time.Second)
	s.Policy, s.Trace = "binpack", "default"
	if s.Pods != 6 || s.PodsPerSec != 3 || s.UnallocatedAt100 == nil || *s.UnallocatedAt100 != 37.5 || s.AllocatedPct != 62.5 {
		t.Errorf("summary = %+v", s)
	}
	if !strings.Contains(s.Line(), "unallocated@100%=37.50%") {
		t.Errorf("line %q", s.Line())
	}
	dir := t.TempDir()
	if err := writeResults(dir, s, rec, 1); err != nil {
		t.Fatal(err)
	}
	back, err := readSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if back.Policy != "binpack" || *back.UnallocatedAt100 != 37.5 {
		t.Errorf("summary.json read back as %+v", back)
	}
	pts, err := readSteps(filepath.Join(dir, "steps.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 6 || pts[4] != (Point{112.5, 62.5}) {
		t.Errorf("steps read back: %v", pts)
	}
}

func TestSummaryLineWithoutArrival(t *testing.T) {
	rec := newRecorder(4000)
	rec.Record(gpuPod("a", 1, 1000), "n1")
	s := newSummary(rec, time.Second)
	if s.UnallocatedAt100 != nil || !strings.Contains(s.Line(), "unallocated@100%=n/a (arrived 25.0%)") {
		t.Errorf("line %q", s.Line())
	}
}

func TestChart(t *testing.T) {
	root := t.TempDir()
	run := func(name, policy string, alloc []float64) string {
		dir := filepath.Join(root, name)
		rec := newRecorder(1000 * int64(len(alloc)))
		for i := range alloc {
			node := "n"
			if alloc[i] == 0 {
				node = ""
			}
			rec.Record(gpuPod("p"+string(rune('a'+i)), 1, 1000), node)
		}
		s := newSummary(rec, time.Second)
		s.Policy = policy
		if err := writeResults(dir, s, rec, 1); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dirs := []string{
		run("a", "binpack", []float64{1, 1, 0, 1}),
		run("b", "binpack", []float64{1, 0, 1, 1}),
		run("c", "spread", []float64{1, 0, 0, 1}),
	}
	series, err := LoadSeries(dirs)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 2 || series[0].Label != "binpack" || series[0].Runs != 2 || series[1].Label != "spread" {
		t.Fatalf("series = %+v", series)
	}
	// binpack runs at 100% arrival: 75% and 75% allocated → 25% unallocated.
	if series[0].At100 == nil || *series[0].At100 != 25 {
		t.Errorf("binpack at100 = %v", series[0].At100)
	}
	// averaged at arrived 50%: run a 50%, run b 25% → 37.5%
	found := false
	for _, p := range series[0].Points {
		if p.Arrived == 50 {
			found = true
			if p.Allocated != 37.5 {
				t.Errorf("binpack at arrived 50%% = %v, want 37.5", p.Allocated)
			}
		}
	}
	if !found {
		t.Errorf("no averaged point at 50%%: %v", series[0].Points)
	}
	var svg bytes.Buffer
	if err := WriteSVG(&svg, "t <test>", series); err != nil {
		t.Fatal(err)
	}
	out := svg.String()
	for _, want := range []string{"<svg", "<polyline", "binpack (25.00% unalloc. @100%, 2 runs)", "spread", "t &lt;test&gt;", "</svg>"} {
		if !strings.Contains(out, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if strings.Count(out, "<polyline") != 2 {
		t.Errorf("want 2 lines, got %d", strings.Count(out, "<polyline"))
	}
	if _, err := LoadSeries([]string{filepath.Join(root, "missing")}); err == nil {
		t.Errorf("missing folder accepted")
	}
}
