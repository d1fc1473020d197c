package policy

import (
	"math"
	"testing"
)

func TestWorkloadPressure(t *testing.T) {
	// Two gpu-mem shapes, 1000 units each: one with 10 cores, one with 30 (mean 20 per 1000
	// units), and pods without gpu-mem taking 5 cores, a third of the pods.
	w := Workload{
		{Cards: 1, PerCard: 1000, Host: Host{CPUMilli: 10000, MemoryMiB: 1024}, Weight: 1.0 / 3},
		{Cards: 1, PerCard: 1000, Host: Host{CPUMilli: 30000, MemoryMiB: 1024}, Weight: 1.0 / 3},
		{Host: Host{CPUMilli: 15000, MemoryMiB: 1024}, Weight: 1.0 / 3},
	}
	// Per 1000 units requested: (10+30+15)/2 = 27.5 cores and 1.5 GiB.
	for _, tc := range []struct {
		name   string
		w      Workload
		c      Capacity
		want   float64
		wantOK bool
	}{
		{"ten cards, 275 cores: CPU runs out with the cards", w, Capacity{Units: 10000, Host: Host{CPUMilli: 275000, MemoryMiB: 1 << 20}}, 1, true},
		{"ten cards, 550 cores", w, Capacity{Units: 10000, Host: Host{CPUMilli: 550000, MemoryMiB: 1 << 20}}, 0.5, true},
		{"memory the scarcer", w, Capacity{Units: 10000, Host: Host{CPUMilli: 550000, MemoryMiB: 15 * 1024 * 10 / 8}}, 0.8, true},
		{"CPU alone known", w, Capacity{Units: 10000, Host: Host{CPUMilli: 550000}}, 0.5, true},
		{"capacity not known", w, Capacity{}, 0, false},
		{"no cards", w, Capacity{Host: Host{CPUMilli: 1000}}, 0, false},
		{"no host", w, Capacity{Units: 1000}, 0, false},
		{"no gpu-mem shape", w[2:], Capacity{Units: 1000, Host: Host{CPUMilli: 1000}}, 0, false},
		{"no workload", nil, Capacity{Units: 1000, Host: Host{CPUMilli: 1000}}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.w.demand().pressure(tc.c)
			if ok != tc.wantOK || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("pressure = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestOwnShare(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		ok   bool
		want float64
	}{
		{0, false, 1}, {2, false, 1}, // not known: each shape's own requests
		{0.3, true, 0}, {pressureLow, true, 0},
		{(pressureLow + pressureHigh) / 2, true, 0.5},
		{pressureHigh, true, 1}, {3, true, 1},
	} {
		if got := ownShare(tc.p, tc.ok); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("ownShare(%v, %v) = %v, want %v", tc.p, tc.ok, got, tc.want)
		}
	}
}

// TestFGDHostCapByPressure: the host cap feeds each shape at the workload's average requests
// where CPU is plentiful cluster-wide, at its own where it is scarce, and between in
// proportion.
func TestFGDHostCapByPressure(t *testing.T) {
	// Whole-card shapes of 10 and 30 cores, one pod each: 20 cores per card on average. Four
	// free cards under 40 free cores: the average pod is fed on two, the 10-core shape on
	// all four (it is never capped: the host feeds everything its own pods could use) and
	// the 30-core one on one.
	w := Workload{
		{Cards: 1, PerCard: 1000, Host: Host{CPUMilli: 10000}, Weight: 0.5},
		{Cards: 1, PerCard: 1000, Host: Host{CPUMilli: 30000}, Weight: 0.5},
	}
	free := []int64{1000, 1000, 1000, 1000}
	host := &Host{CPUMilli: 40000, MemoryMiB: 1}
	// Pressure = 20 cores per 1000 units × Units / 2000 cores.
	capacity := func(p float64) Capacity {
		return Capacity{Units: int64(p * 100000), Host: Host{CPUMilli: 2000000}}
	}
	for _, tc := range []struct {
		name string
		c    Capacity
		want float64 // F: the host cap's stranded units, at hostCapWeight
	}{
		{"capacity not known: each shape's own", Capacity{}, (0.5*0 + 0.5*3000) * hostCapWeight},
		{"plentiful: the average pod's", capacity(0.5), 0.5 * 2000 * hostCapWeight},
		{"scarce: each shape's own", capacity(1.25), (0.5*0 + 0.5*3000) * hostCapWeight},
		// Halfway: the 30-core shape is fed 0.5×1000 + 0.5×2000 = 1500 units.
		{"halfway", capacity(0.9), 0.5 * 2500 * hostCapWeight},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFGD(w, tc.c)
			var s scratch
			if got := f.frag(free, true, f.caps(host, free, &s), nil, &s); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("frag = %v, want %v (own share %v)", got, tc.want, f.own)
			}
		})
	}
}
