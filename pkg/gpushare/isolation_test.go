package gpushare

import "testing"

func TestParseIsolation(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Isolation
		wantErr bool
	}{
		{in: "", want: IsolationNone},
		{in: "none", want: IsolationNone},
		{in: "mps", want: IsolationMPS},
		{in: "limit", want: IsolationLimit},
		{in: "Limit", wantErr: true},
		{in: "MPS", wantErr: true},
		{in: "hami", wantErr: true},
		{in: " mps", wantErr: true},
	} {
		got, err := ParseIsolation(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseIsolation(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestIsolationAdmits: MPS nodes take one card per container; a node without isolation
// takes any shape.
func TestIsolationAdmits(t *testing.T) {
	one := ContainerRequest{Name: "one", Units: 4, Cards: 1}
	two := ContainerRequest{Name: "two", Units: 8, Cards: 2}
	burst := ContainerRequest{Name: "burst", Units: 4, Cards: 1, Limit: 12}
	core := ContainerRequest{Name: "core", Units: 4, Cards: 1, Compute: 25}
	tests := []struct {
		name    string
		mode    Isolation
		req     PodRequest
		wantErr string
	}{
		{name: "none takes two cards", mode: IsolationNone, req: PodRequest{Containers: []ContainerRequest{two}}},
		{name: "mps takes one card", mode: IsolationMPS, req: PodRequest{Containers: []ContainerRequest{one, one}}},
		{name: "mps refuses two cards", mode: IsolationMPS, req: PodRequest{Containers: []ContainerRequest{one, two}},
			wantErr: `node isolates cards with MPS (gpushare.io/isolation=mps): one card per container, and container "two" asks for 2`},
		{name: "limit takes a memory limit", mode: IsolationLimit, req: PodRequest{Containers: []ContainerRequest{one, burst}}},
		{name: "none refuses a memory limit", mode: IsolationNone, req: PodRequest{Containers: []ContainerRequest{one, burst}},
			wantErr: `container "burst" has a GPU-memory limit (gpushare.io/gpu-mem-limit: 12 above its request 4), which only nodes labelled gpushare.io/isolation=limit enforce, and this node is none`},
		{name: "mps refuses a memory limit", mode: IsolationMPS, req: PodRequest{Containers: []ContainerRequest{burst}},
			wantErr: `container "burst" has a GPU-memory limit (gpushare.io/gpu-mem-limit: 12 above its request 4), which only nodes labelled gpushare.io/isolation=limit enforce, and this node is mps`},
		{name: "mps takes a compute share", mode: IsolationMPS, req: PodRequest{Containers: []ContainerRequest{core}}},
		{name: "none refuses a compute share", mode: IsolationNone, req: PodRequest{Containers: []ContainerRequest{core}},
			wantErr: `container "core" has a compute share (gpushare.io/gpu-core: 25 percent), which only nodes labelled gpushare.io/isolation=mps enforce, and this node is none`},
		{name: "limit refuses a compute share", mode: IsolationLimit, req: PodRequest{Containers: []ContainerRequest{core}},
			wantErr: `container "core" has a compute share (gpushare.io/gpu-core: 25 percent), which only nodes labelled gpushare.io/isolation=mps enforce, and this node is limit`},
		{name: "a limit equal to the request is none", mode: IsolationNone, req: PodRequest{Containers: []ContainerRequest{{Name: "eq", Units: 4, Cards: 1, Limit: 4}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.mode.Admits(tc.req)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("Admits = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func TestNodeIsolationAndMPSMemLimit(t *testing.T) {
	if got, err := NodeIsolation(map[string]string{LabelIsolation: "mps"}); got != IsolationMPS || err != nil {
		t.Errorf("NodeIsolation(mps) = %q, %v", got, err)
	}
	if got, err := NodeIsolation(nil); got != IsolationNone || err != nil {
		t.Errorf("NodeIsolation(no labels) = %q, %v", got, err)
	}
	if _, err := NodeIsolation(map[string]string{LabelIsolation: "mpss"}); err == nil {
		t.Error("NodeIsolation(mpss) accepted a typo")
	}
	if got := MPSMemLimit(4096); got != "0=4096M" {
		t.Errorf("MPSMemLimit(4096) = %q", got)
	}
}
