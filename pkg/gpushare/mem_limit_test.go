package gpushare

import (
	"strings"
	"testing"
)

// TestWithMemLimits: the limit annotation is tenant input, read strictly: a limit below the
// request, malformed, for a container without gpu-mem, or not divisible by the cards is an
// error naming the annotation; a pod without it is unchanged.
func TestWithMemLimits(t *testing.T) {
	res := DefaultResources()
	tests := []struct {
		name    string
		ann     string // "-": no annotation
		want    map[string]int64
		wantErr string
	}{
		{name: "no annotation", ann: "-", want: map[string]int64{"main": 0, "side": 0, "two": 0}},
		{name: "one container", ann: "main=12", want: map[string]int64{"main": 12, "side": 0, "two": 0}},
		{name: "spaces and several", ann: " main=12 , side=3,two=8", want: map[string]int64{"main": 12, "side": 3, "two": 8}},
		{name: "limit equal to request", ann: "main=4", want: map[string]int64{"main": 4, "side": 0, "two": 0}},
		{name: "below request", ann: "main=3", wantErr: `container "main": limit 3 is below its gpu-mem request 4`},
		{name: "container without gpu-mem", ann: "plain=4", wantErr: `container "plain" requests no gpu-mem`},
		{name: "no such container", ann: "ghost=4", wantErr: `container "ghost" requests no gpu-mem (or the pod has no such container)`},
		{name: "not divisible by cards", ann: "two=9", wantErr: `limit 9 is not divisible by its 2 cards`},
		{name: "empty", ann: "", wantErr: `entry "": want <container>=<units>`},
		{name: "trailing comma", ann: "main=8,", wantErr: `entry "": want`},
		{name: "no equals", ann: "main:8", wantErr: `want <container>=<units>`},
		{name: "unit suffix", ann: "main=8Gi", wantErr: `limit "8Gi": want a whole number`},
		{name: "sign", ann: "main=+8", wantErr: `want a whole number`},
		{name: "negative", ann: "main=-8", wantErr: `want a whole number`},
		{name: "zero", ann: "main=0", wantErr: `want 1..4294967296 units`},
		{name: "huge", ann: "main=99999999999999999999", wantErr: `want 1..4294967296 units`},
		{name: "overflow digits", ann: "main=999999999999999999999999", wantErr: `want a whole number`},
		{name: "twice", ann: "main=8,main=9", wantErr: `container "main" is named twice`},
		{name: "bad name", ann: "Main=8", wantErr: `"Main" is not a container name`},
		{name: "too long", ann: "main=8," + strings.Repeat("x", 5000), wantErr: "longer than 4096 bytes"},
		{name: "too many", ann: strings.Repeat("a=1,", 70) + "a=1", wantErr: "71 entries, at most 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{}
			if tc.ann != "-" {
				ann[AnnotationMemLimit] = tc.ann
			}
			p := pod(ann, nil, ctr("main", 4, 0), ctr("side", 2, 0), ctr("two", 4, 2), ctr("plain", 0, 0))
			req, err := res.PlacementRequest(p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), AnnotationMemLimit) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, AnnotationMemLimit, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range req.Containers {
				if c.Limit != tc.want[c.Name] {
					t.Errorf("container %s: limit %d, want %d", c.Name, c.Limit, tc.want[c.Name])
				}
			}
			// Accounting never reads the limit.
			plain, err := res.PodRequest(p)
			if err != nil || plain.Limited() {
				t.Errorf("PodRequest = %+v, %v: want no limits", plain, err)
			}
		})
	}
}

// TestMemLimitOnPodWithoutGPUMem: a pod without gpu-mem (a DRA claim pod, say) that names a
// limit is refused: limits go with a gpu-mem request.
func TestMemLimitOnPodWithoutGPUMem(t *testing.T) {
	p := pod(map[string]string{AnnotationMemLimit: "main=4"}, nil, ctr("main", 0, 0))
	if _, err := DefaultResources().PlacementRequest(p); err == nil || !strings.Contains(err.Error(), "requests no gpu-mem") {
		t.Fatalf("error %v, want a refusal", err)
	}
}

// TestLimitHelpers: a container without limit has its request as limit; LimitAllocation puts
// each limited container's limit per card in place of its units, so CardUsage gives the
// pod's hard limit by the effective-request rule.
func TestLimitHelpers(t *testing.T) {
	req := PodRequest{Containers: []ContainerRequest{
		{Ref: ContainerRef{InitList: true, Index: 0}, Name: "init", Kind: Init, Units: 2, Cards: 1, Limit: 10},
		{Ref: ContainerRef{Index: 0}, Name: "main", Kind: App, Units: 4, Cards: 2, Limit: 12},
		{Ref: ContainerRef{Index: 1}, Name: "side", Kind: App, Units: 1, Cards: 1},
	}}
	if !req.Limited() || req.Containers[2].Limited() || req.Containers[2].LimitUnits() != 1 || req.Containers[1].LimitPerCard() != 6 {
		t.Fatalf("Limited/LimitUnits/LimitPerCard wrong: %+v", req)
	}
	a := PodAllocation{App: Allocation{0: {0: 2, 1: 2}, 1: {0: 1}}, Init: Allocation{0: {1: 2}}}
	got := req.LimitAllocation(a).CardUsage(nil)
	want := CardUnits{0: 7, 1: 10} // card 0: main 6 + side 1; card 1: max(main 6, init 10)
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("limit usage %v, want %v", got, want)
	}
	if g := a.CardUsage(nil); g[0] != 3 || g[1] != 2 {
		t.Errorf("grant usage changed: %v", g)
	}
	if s := FormatMemLimits(req); s != "init=10,main=12" {
		t.Errorf("FormatMemLimits = %q", s)
	}
}
