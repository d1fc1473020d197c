package gpushare

import (
	"strings"
	"testing"
)

// TestWithComputeShares: the compute-share annotation is tenant input, read strictly: a
// share malformed, off the 5 % steps, out of 5..100, for a container without gpu-mem or on
// several cards, missing on a gpu-mem container, or shares adding up past one card are
// errors naming the annotation; a pod without it is unchanged.
func TestWithComputeShares(t *testing.T) {
	res := DefaultResources()
	tests := []struct {
		name    string
		ann     string // "-": no annotation
		want    map[string]uint8
		wantErr string
	}{
		{name: "no annotation", ann: "-", want: map[string]uint8{"main": 0, "side": 0}},
		{name: "both", ann: "main=25,side=10", want: map[string]uint8{"main": 25, "side": 10}},
		{name: "spaces", ann: " main=5 , side=95", want: map[string]uint8{"main": 5, "side": 95}},
		{name: "one missing", ann: "main=25", wantErr: `container "side" requests gpu-mem but has no compute share`},
		{name: "sum past a card", ann: "main=60,side=50", wantErr: `add up to 110 percent`},
		{name: "not a step", ann: "main=23,side=10", wantErr: `compute share "23": want 5..100 in steps of 5`},
		{name: "zero", ann: "main=0,side=10", wantErr: `want 5..100 in steps of 5`},
		{name: "above 100", ann: "main=105,side=10", wantErr: `want 5..100 in steps of 5`},
		{name: "percent sign", ann: "main=25%,side=10", wantErr: `want a whole percent`},
		{name: "sign", ann: "main=+25,side=10", wantErr: `want a whole percent`},
		{name: "fraction", ann: "main=2.5,side=10", wantErr: `want a whole percent`},
		{name: "huge", ann: "main=99999999999999999999,side=10", wantErr: `want a whole percent`},
		{name: "empty", ann: "", wantErr: `entry "": want <container>=<percent>`},
		{name: "no equals", ann: "main", wantErr: `want <container>=<percent>`},
		{name: "twice", ann: "main=5,main=10", wantErr: `container "main" is named twice`},
		{name: "bad name", ann: "Main=5", wantErr: `"Main" is not a container name`},
		{name: "without gpu-mem", ann: "main=5,side=5,plain=5", wantErr: `container "plain" requests no gpu-mem`},
		{name: "too long", ann: "main=5," + strings.Repeat("x", 5000), wantErr: "longer than 4096 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ann := map[string]string{}
			if tc.ann != "-" {
				ann[AnnotationComputeShare] = tc.ann
			}
			p := pod(ann, nil, ctr("main", 4, 0), ctr("side", 2, 0), ctr("plain", 0, 0))
			req, err := res.PlacementRequest(p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), AnnotationComputeShare) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, AnnotationComputeShare, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range req.Containers {
				if c.Compute != tc.want[c.Name] {
					t.Errorf("container %s: compute %d, want %d", c.Name, c.Compute, tc.want[c.Name])
				}
			}
		})
	}
}

// TestComputeShareRefusals: a share on a multi-card container, or on a pod without gpu-mem,
// is refused.
func TestComputeShareRefusals(t *testing.T) {
	two := pod(map[string]string{AnnotationComputeShare: "two=50"}, nil, ctr("two", 8, 2))
	if _, err := DefaultResources().PlacementRequest(two); err == nil || !strings.Contains(err.Error(), "asks for 2 cards") {
		t.Errorf("multi-card: error %v, want a refusal", err)
	}
	none := pod(map[string]string{AnnotationComputeShare: "main=50"}, nil, ctr("main", 0, 0))
	if _, err := DefaultResources().PlacementRequest(none); err == nil || !strings.Contains(err.Error(), "requests no gpu-mem") {
		t.Errorf("no gpu-mem: error %v, want a refusal", err)
	}
}

// TestPeakCompute: shares add up by the effective-request rule; FormatComputeShares writes
// them back in the request's order.
func TestPeakCompute(t *testing.T) {
	req := PodRequest{Containers: []ContainerRequest{
		{Name: "init", Kind: Init, Compute: 80, Cards: 1},
		{Name: "sc", Kind: Sidecar, Compute: 10, Cards: 1},
		{Name: "late", Kind: Init, Compute: 50, Cards: 1},
		{Name: "main", Kind: App, Compute: 25, Cards: 1},
	}}
	if got := req.PeakCompute(); got != 80 {
		t.Errorf("PeakCompute = %d, want 80 (the first init container alone)", got)
	}
	if !req.Computes() || (PodRequest{}).Computes() {
		t.Error("Computes wrong")
	}
	if s := FormatComputeShares(req); s != "init=80,sc=10,late=50,main=25" {
		t.Errorf("FormatComputeShares = %q", s)
	}
}
