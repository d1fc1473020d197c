package gpushare

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzPodAnnotations: the per-pod annotations a tenant or an older extender can write (the
// memory limits, the compute shares, the card allocation and the device plugin's progress)
// never make the readers panic, and what they accept keeps the rules the ledger counts on:
// limits at or above the request and divisible by the cards, shares in steps of 5 up to 100,
// allocations that ValidateAllocation accepts giving each card at most the container's
// share, and the formatted annotations parsing back to the same values.
func FuzzPodAnnotations(f *testing.F) {
	for _, s := range [][5]string{
		{"main=16", "main=25", `{"0":{"0":8}}`, "", "app/0"},
		{"main=16,side=2", "main=25,side=10", `{"0":{"0":4,"1":4}}`, `{"0":{"1":2}}`, "app/0,init/0"},
		{"main=0", "main=3", `{"-1":{"0":8}}`, "", "app/-1"},
		{"main=99999999999999999999", "main=105", `{"0":{"99999999":8}}`, "", "init/x"},
		{" main = 8 ", "main=", `{"0":{"0":-1}}`, "[]", ","},
		{strings.Repeat("a=1,", 70), strings.Repeat("m", 70) + "=5", "null", "{}", "app/0,app/0"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], "0")
	}
	r := DefaultResources()
	f.Fuzz(func(t *testing.T, limit, share, alloc, initAlloc, allocated, idx string) {
		p := pod(map[string]string{
			AnnotationMemLimit:       limit,
			AnnotationComputeShare:   share,
			AnnotationAllocation:     alloc,
			AnnotationInitAllocation: initAlloc,
			AnnotationAllocated:      allocated,
			AnnotationIndex:          idx,
		}, []corev1.Container{sidecar(ctr("side", 2, 0))}, ctr("main", 8, 2), ctr("cpu", 0, 0))
		req, err := r.PodRequest(p)
		if err != nil {
			t.Fatalf("PodRequest of the fixed containers: %v", err)
		}

		if lim, err := WithMemLimits(p, req); err == nil {
			for _, c := range lim.Containers {
				if c.LimitUnits() < c.Units || c.LimitUnits()%int64(c.Cards) != 0 {
					t.Fatalf("container %s: limit %d against request %d on %d cards", c.Name, c.LimitUnits(), c.Units, c.Cards)
				}
			}
			if v := FormatMemLimits(lim); v != "" {
				got, err := ParseMemLimits(v)
				if err != nil {
					t.Fatalf("formatted limits %q do not parse back: %v", v, err)
				}
				for _, e := range got {
					if c := limitOf(lim, e.Container); c == nil || c.Limit != e.Units {
						t.Fatalf("formatted limits %q: %s=%d is not the container's limit", v, e.Container, e.Units)
					}
				}
			}
		}

		if cs, err := WithComputeShares(p, req); err == nil {
			for _, c := range cs.Containers {
				if c.Compute < 0 || c.Compute > MaxComputeShare || c.Compute%ComputeShareStep != 0 {
					t.Fatalf("container %s: compute share %d", c.Name, c.Compute)
				}
			}
			if v := FormatComputeShares(cs); v != "" {
				if got, err := ParseComputeShares(v); err != nil || len(got) == 0 {
					t.Fatalf("formatted shares %q do not parse back: %v", v, err)
				}
			}
			if peak := cs.PeakCompute(); peak < 0 {
				t.Fatalf("peak compute %d", peak)
			}
		}

		if a, ok, err := r.ReadAllocation(p); err == nil && ok && req.ValidateAllocation(a) == nil {
			for card, u := range a.CardUsage(p) {
				if card < 0 || u < 0 || u > req.TotalUnits() {
					t.Fatalf("card %d holds %d units of a pod of %d", card, u, req.TotalUnits())
				}
			}
			_ = req.LimitAllocation(a)
		}

		if done, err := ParseAllocated(allocated); err == nil {
			for ref := range done {
				if ref.Index < 0 {
					t.Fatalf("served container %s", ref)
				}
			}
		}
	})
}

// limitOf is the request of the container named name, nil when req has none.
func limitOf(req PodRequest, name string) *ContainerRequest {
	for i := range req.Containers {
		if req.Containers[i].Name == name {
			return &req.Containers[i]
		}
	}
	return nil
}
