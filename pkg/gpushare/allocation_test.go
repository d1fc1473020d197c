package gpushare

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestReadAllocation(t *testing.T) {
	res := DefaultResources()
	tests := []struct {
		name      string
		pod       *corev1.Pod
		want      PodAllocation
		wantOK    bool
		wantUsage CardUnits
		wantErr   string
	}{
		{
			name: "no annotation: not placed",
			pod:  pod(nil, nil, ctr("a", 4, 0)),
		},
		{
			name:      "per-container form",
			pod:       pod(map[string]string{AnnotationAllocation: `{"0":{"1":4},"1":{"1":2,"3":2}}`}, nil, ctr("a", 4, 0), ctr("b", 4, 2)),
			want:      PodAllocation{App: Allocation{0: {1: 4}, 1: {1: 2, 3: 2}}},
			wantOK:    true,
			wantUsage: CardUnits{1: 6, 3: 2},
		},
		{
			name:      "legacy single-card form: every container on IDX",
			pod:       pod(map[string]string{AnnotationIndex: "2", AnnotationPodUnits: "6"}, nil, ctr("a", 4, 0), ctr("b", 2, 0)),
			want:      PodAllocation{App: Allocation{0: {2: 4}, 1: {2: 2}}},
			wantOK:    true,
			wantUsage: CardUnits{2: 6},
		},
		{
			name:    "legacy form cannot describe a multi-card container",
			pod:     pod(map[string]string{AnnotationIndex: "0"}, nil, ctr("a", 8, 2)),
			wantErr: "single-card annotation",
		},
		{
			name:    "malformed per-container JSON",
			pod:     pod(map[string]string{AnnotationAllocation: `{"a":1}`}, nil, ctr("a", 4, 0)),
			wantErr: "decoding allocation",
		},
		{
			name:    "malformed IDX",
			pod:     pod(map[string]string{AnnotationIndex: "x"}, nil, ctr("a", 4, 0)),
			wantErr: "not a card index",
		},
		{
			// init 10 on card 0 runs alone; apps 4+2 on card 0 run together: max(10, 6) = 10.
			name: "init container reuses the app reservation",
			pod: pod(map[string]string{
				AnnotationAllocation:     `{"0":{"0":4},"1":{"0":2}}`,
				AnnotationInitAllocation: `{"0":{"0":10}}`,
			}, []corev1.Container{ctr("init", 10, 0)}, ctr("a", 4, 0), ctr("b", 2, 0)),
			want:      PodAllocation{App: Allocation{0: {0: 4}, 1: {0: 2}}, Init: Allocation{0: {0: 10}}},
			wantOK:    true,
			wantUsage: CardUnits{0: 10},
		},
		{
			// sidecar 2 + app 3 = 5 running on card 0; init 8 beside the sidecar = 10: max = 10.
			name: "sidecar adds to apps and to each init",
			pod: pod(map[string]string{
				AnnotationAllocation:     `{"0":{"0":3}}`,
				AnnotationInitAllocation: `{"0":{"0":2},"1":{"0":8}}`,
			}, []corev1.Container{sidecar(ctr("side", 2, 0)), ctr("init", 8, 0)}, ctr("a", 3, 0)),
			want:      PodAllocation{App: Allocation{0: {0: 3}}, Init: Allocation{0: {0: 2}, 1: {0: 8}}},
			wantOK:    true,
			wantUsage: CardUnits{0: 10},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := res.ReadAllocation(tc.pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("allocation (-want,+got):\n%s", diff)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(tc.wantUsage, got.CardUsage(tc.pod)); diff != "" {
				t.Errorf("usage (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBindAnnotations(t *testing.T) {
	now := time.Unix(1700000000, 123)
	single := PodAllocation{App: Allocation{0: {1: 4}}}
	got := BindAnnotations(single, 4, CardUnits{0: 14, 1: 16}, GiB, now)
	want := map[string]string{
		AnnotationUnit:       "GiB",
		AnnotationAllocation: `{"0":{"1":4}}`,
		AnnotationPodUnits:   "4",
		AnnotationAssigned:   "false",
		AnnotationAssumeTime: "1700000000000000123",
		AnnotationIndex:      "1",
		AnnotationDevUnits:   "16",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("single-card (-want,+got):\n%s", diff)
	}

	multi := PodAllocation{App: Allocation{0: {0: 8, 1: 8}}, Init: Allocation{0: {0: 2}}}
	got = BindAnnotations(multi, 16, CardUnits{0: 16, 1: 16}, Unit{MiB: 256}, now)
	want = map[string]string{
		AnnotationUnit:           "256MiB",
		AnnotationAllocation:     `{"0":{"0":8,"1":8}}`,
		AnnotationInitAllocation: `{"0":{"0":2}}`,
		AnnotationPodUnits:       "16",
		AnnotationAssigned:       "false",
		AnnotationAssumeTime:     "1700000000000000123",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("multi-card (-want,+got):\n%s", diff)
	}
	for k := range got {
		found := false
		for _, key := range BindAnnotationKeys() {
			found = found || key == k
		}
		if !found {
			t.Errorf("BindAnnotationKeys misses %q (a stale copy would survive a bind)", k)
		}
	}
	if _, unknown := BindAnnotations(single, 4, CardUnits{1: 16}, Unit{}, now)[AnnotationUnit]; unknown {
		t.Errorf("BindAnnotations with the zero Unit (node's unit unknown) wrote %s", AnnotationUnit)
	}
	if at := AssumeTime(pod(got, nil)); !at.Equal(now) {
		t.Errorf("AssumeTime = %v, want %v", at, now)
	}
}

func TestAllocatedRoundTrip(t *testing.T) {
	set, err := ParseAllocated("app/1, init/0,app/0")
	if err != nil {
		t.Fatal(err)
	}
	want := map[ContainerRef]bool{{Index: 1}: true, {InitList: true, Index: 0}: true, {Index: 0}: true}
	if diff := cmp.Diff(want, set); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if s := FormatAllocated(set); s != "app/0,app/1,init/0" {
		t.Errorf("FormatAllocated = %q", s)
	}
	for _, bad := range []string{"app", "x/1", "app/-1", "app/x"} {
		if _, err := ParseAllocated(bad); err == nil {
			t.Errorf("ParseAllocated(%q) succeeded", bad)
		}
	}
	if set, err := ParseAllocated(""); err != nil || len(set) != 0 {
		t.Errorf("empty: %v %v", set, err)
	}
}

// TestValidateAllocation checks both ValidateAllocationOn on a node with cards 0 and 1 and
// ValidateAllocation, which asks nothing of the node.
func TestValidateAllocation(t *testing.T) {
	res := DefaultResources()
	// a: 16 units on 1 card; b: 16 over 2 cards (8 each); init/0: 4 on 1 card; c: no gpu-mem
	p := pod(nil, []corev1.Container{ctr("i", 4, 0)}, ctr("a", 16, 0), ctr("b", 16, 2), ctr("c", 0, 0))
	req, err := res.PodRequest(p)
	if err != nil {
		t.Fatal(err)
	}
	valid := func() PodAllocation {
		return PodAllocation{App: Allocation{0: {0: 16}, 1: {0: 8, 1: 8}}, Init: Allocation{0: {1: 4}}}
	}
	onNode := func(i int) bool { return i == 0 || i == 1 }
	tests := []struct {
		name    string
		edit    func(a *PodAllocation)
		wantErr string // ValidateAllocationOn's; "" = valid
		// offNode: the only fault is a card the node lacks, which ValidateAllocation accepts.
		offNode bool
	}{
		{"exact", func(*PodAllocation) {}, "", false},
		{"zero units", func(a *PodAllocation) { a.App[0] = CardUnits{0: 0} },
			`container "a" (app/0): allocation holds 0 units on card 0, the request wants 16 per card`, false},
		{"too many units", func(a *PodAllocation) { a.App[0] = CardUnits{0: 9223372036854775807} },
			`container "a" (app/0): allocation holds 9223372036854775807 units on card 0, the request wants 16 per card`, false},
		{"one card short", func(a *PodAllocation) { a.App[1] = CardUnits{0: 16} },
			`container "b" (app/1): allocation lists 1 cards, the request wants 2`, false},
		{"missing container", func(a *PodAllocation) { delete(a.App, 1) },
			`container "b" (app/1): no cards in the allocation; it requests 16 units`, false},
		{"missing init container", func(a *PodAllocation) { a.Init = nil },
			`container "i" (init/0): no cards in the allocation; it requests 4 units`, false},
		{"empty entry for a gpu-mem container", func(a *PodAllocation) { a.App[1] = CardUnits{} },
			`container "b" (app/1): no cards in the allocation; it requests 16 units`, false},
		{"container without gpu-mem", func(a *PodAllocation) { a.App[2] = CardUnits{0: 1} },
			"allocation names container app/2, which does not exist or requests no gpu-mem", false},
		{"container that does not exist", func(a *PodAllocation) { a.Init[5] = CardUnits{0: 1} },
			"allocation names container init/5, which does not exist or requests no gpu-mem", false},
		{"empty entry for a container without gpu-mem names nothing", func(a *PodAllocation) { a.App[2] = CardUnits{} }, "", false},
		{"empty entry for a container that does not exist names nothing", func(a *PodAllocation) { a.Init[5] = CardUnits{} }, "", false},
		{"card index too large", func(a *PodAllocation) { a.App[0] = CardUnits{MaxCardIndex: 16} },
			`container "a" (app/0): card index 1024 out of range 0..1023`, false},
		{"negative card index", func(a *PodAllocation) { a.Init[0] = CardUnits{-1: 4} },
			`container "i" (init/0): card index -1 out of range 0..1023`, false},
		{"card the node lacks", func(a *PodAllocation) { a.App[1] = CardUnits{0: 8, 7: 8} },
			`container "b" (app/1): allocation names card 7, which the node does not have`, true},
		{"init card the node lacks", func(a *PodAllocation) { a.Init[0] = CardUnits{2: 4} },
			`container "i" (init/0): allocation names card 2, which the node does not have`, true},
		// Several faults: the first container of the request (init/0), its lowest card.
		{"first fault in order", func(a *PodAllocation) {
			a.App[2] = CardUnits{0: 1}
			a.App[1] = CardUnits{0: 1, 1: 1}
			a.Init[0] = CardUnits{1: 3}
		}, `container "i" (init/0): allocation holds 3 units on card 1, the request wants 4 per card`, false},
		{"lowest card first", func(a *PodAllocation) { a.App[1] = CardUnits{9: 8, 5: 8} },
			`container "b" (app/1): allocation names card 5, which the node does not have`, true},
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := valid()
			tc.edit(&a)
			anywhere := tc.wantErr
			if tc.offNode {
				anywhere = ""
			}
			// Map order varies from run to run; the error must not.
			for range 20 {
				if got := errText(req.ValidateAllocationOn(a, onNode)); got != tc.wantErr {
					t.Fatalf("ValidateAllocationOn = %q, want %q", got, tc.wantErr)
				}
				if got := errText(req.ValidateAllocation(a)); got != anywhere {
					t.Fatalf("ValidateAllocation = %q, want %q", got, anywhere)
				}
			}
		})
	}
}
