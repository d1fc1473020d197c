package replay

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/policy"
)

// TestOfflineReserve: on one node of two cards, a second 810-milli pod would take the last
// free card and leave the whole-card pod nowhere; held back, it fails instead, and a pod that
// fits beside another goes there, onto the card already in use.
func TestOfflineReserve(t *testing.T) {
	nodes := []NodeSpec{{Name: "n0", MilliCPU: 8000, MemoryMiB: 8192, GPUs: 2, Model: "T4"}}
	for _, tc := range []struct {
		name    string
		reserve Reservation
		pods    []PodSpec
		want    []string
	}{
		{"none", Reservation{}, []PodSpec{gpuPod("a", 1, 810), gpuPod("b", 1, 810), gpuPod("c", 1, 1000)}, []string{"a@n0", "b@n0", "c@"}},
		{"held back", Reservation{Cards: 2, MinMilli: 800, MaxMilli: 999}, []PodSpec{gpuPod("a", 1, 810), gpuPod("b", 1, 810), gpuPod("c", 1, 1000)}, []string{"a@n0", "b@", "c@n0"}},
		// b is below the range: it takes the last free card.
		{"outside the range", Reservation{Cards: 2, MinMilli: 800, MaxMilli: 999}, []PodSpec{gpuPod("a", 1, 810), gpuPod("b", 1, 700), gpuPod("c", 1, 1000)}, []string{"a@n0", "b@n0", "c@"}},
		// b goes beside a; c then has the free card.
		{"onto a used card", Reservation{Cards: 2, MinMilli: 500, MaxMilli: 999}, []PodSpec{gpuPod("a", 1, 300), gpuPod("b", 1, 500), gpuPod("c", 1, 1000)}, []string{"a@n0", "b@n0", "c@n0"}},
		// Two free cards are not fewer than two: nothing is held back.
		{"enough free", Reservation{Cards: 2, MinMilli: 500, MaxMilli: 999}, []PodSpec{gpuPod("a", 1, 810), gpuPod("c", 1, 1000)}, []string{"a@n0", "c@n0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := replayPlacements(t, "spread", offlineConfig{Reserve: tc.reserve}, nodes, tc.pods)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("placements (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestReservationFlags: the range parses, the mode suffix names it, and a reservation that
// cannot apply is refused.
func TestReservationFlags(t *testing.T) {
	var r Reservation
	if err := r.ParseReservationRange("800-999"); err != nil {
		t.Fatal(err)
	}
	if r.MinMilli != 800 || r.MaxMilli != 999 {
		t.Errorf("range = %d-%d, want 800-999", r.MinMilli, r.MaxMilli)
	}
	if got := r.String(); got != "" {
		t.Errorf("suffix with no cards = %q, want none", got)
	}
	r.Cards = 600
	if got, want := r.String(), "-reserve600-800-999"; got != want {
		t.Errorf("suffix = %q, want %q", got, want)
	}
	for _, s := range []string{"", "800", "999-800", "0-999", "500-1000", "a-b", "-5-10"} {
		if err := new(Reservation).ParseReservationRange(s); err == nil {
			t.Errorf("range %q accepted", s)
		}
	}
	pol, _ := policy.New("binpack")
	for name, cfg := range map[string]offlineConfig{
		"DRA":          {Policy: pol, DRA: DRAGPUShare, Reserve: Reservation{Cards: 10, MinMilli: 500, MaxMilli: 999}},
		"negative":     {Policy: pol, Reserve: Reservation{Cards: -1}},
		"empty range":  {Policy: pol, Reserve: Reservation{Cards: 10}},
		"defragmenter": {Policy: pol, Defrag: 4, Reserve: Reservation{Cards: 10, MinMilli: 500, MaxMilli: 999}},
	} {
		if _, _, err := newOffline(cfg, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
