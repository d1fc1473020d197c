package bound

import (
	"context"
	"math"
	"testing"
)

func TestCompute(t *testing.T) {
	card := func(model string, cards int) Node {
		return Node{Model: model, Cards: cards, MilliCPU: 64000, MemoryMiB: 262144}
	}
	gpu := func(n int, milli int64, models ...string) Pod {
		return Pod{NumGPU: n, GPUMilli: milli, MilliCPU: 1000, MemoryMiB: 1024, Models: models}
	}
	tests := []struct {
		name  string
		nodes []Node
		pods  []Pod
		want  float64 // the optimum's unallocated %, which these bounds reach
		plain float64 // the bound without cuts
	}{
		{"two 600s on one card: one fits", []Node{card("T4", 1)}, []Pod{gpu(1, 600), gpu(1, 600)}, 40, 0},
		{"three 600s on two cards", []Node{card("T4", 2)}, []Pod{gpu(1, 600), gpu(1, 600), gpu(1, 600)}, 40, 10},
		{"halves fill cards", []Node{card("T4", 2)}, []Pod{gpu(1, 500), gpu(1, 500), gpu(1, 500), gpu(1, 500)}, 0, 0},
		{"gpu_spec: only the V100 card", []Node{card("T4", 1), card("V100", 1)}, []Pod{gpu(1, 1000, "V100"), gpu(1, 1000, "V100")}, 50, 50},
		{"2-card pods on 1-card nodes", []Node{card("T4", 1), card("T4", 1)}, []Pod{gpu(2, 1000)}, 100, 100},
		{"cpu: one 40-core pod per node", []Node{card("T4", 2)}, []Pod{
			{NumGPU: 1, GPUMilli: 1000, MilliCPU: 40000, MemoryMiB: 1}, {NumGPU: 1, GPUMilli: 1000, MilliCPU: 40000, MemoryMiB: 1},
		}, 50, 20},
		{"CPU-only pods are left out", []Node{card("T4", 1)}, []Pod{{MilliCPU: 64000}, gpu(1, 1000)}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Compute(context.Background(), tt.nodes, tt.pods, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.UnallocatedPct-tt.want) > 1e-4 || math.Abs(r.PlainPct-tt.plain) > 1e-4 {
				t.Errorf("bound %.4f %% (plain %.4f %%), want %.4f %% (plain %.4f %%); %+v", r.UnallocatedPct, r.PlainPct, tt.want, tt.plain, r)
			}
		})
	}
}

func TestComputeErrors(t *testing.T) {
	if _, err := Compute(context.Background(), []Node{{Model: "T4"}}, nil, Options{}); err == nil {
		t.Error("no GPU: want an error")
	}
	if _, err := Compute(context.Background(), []Node{{Model: "T4", Cards: 1, MilliCPU: 1, MemoryMiB: 1}}, []Pod{{NumGPU: 1, GPUMilli: 1001}}, Options{}); err == nil {
		t.Error("gpu-milli 1001: want an error")
	}
}

func TestRoundDown(t *testing.T) {
	tests := []struct {
		v    int64
		sig  int
		want int64
	}{
		{12345, -1, 12345}, {12345, 0, 0}, {0b1011_0111, 3, 0b1010_0000}, {7, 6, 7}, {-5, 3, 0},
	}
	for _, tt := range tests {
		if got := roundDown(tt.v, tt.sig); got != tt.want {
			t.Errorf("roundDown(%d, %d) = %d, want %d", tt.v, tt.sig, got, tt.want)
		}
	}
}

func TestRowKey(t *testing.T) {
	a := row{terms: []term{{2, 1}, {0, 0.5}}, rhs: 2}
	b := row{terms: []term{{0, 1}, {2, 2}}, rhs: 4} // a, scaled and reordered
	c := row{terms: []term{{0, 1}, {2, 2}}, rhs: 3}
	if a.key() != b.key() {
		t.Errorf("a scaled row has another key: %q, %q", a.key(), b.key())
	}
	if a.key() == c.key() {
		t.Errorf("rows with other right-hand sides share key %q", a.key())
	}
}
