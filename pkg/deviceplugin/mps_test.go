package deviceplugin

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/mps"
)

// TestAllocateMPSDaemonPerGrant: containers with the same grant on a card share one daemon,
// another grant gets one of its own, and each daemon's cap is its containers' grant.
func TestAllocateMPSDaemonPerGrant(t *testing.T) {
	e := newTestEnv(t, "t4:2",
		makePod("a", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4})),
		makePod("b", 2, 11, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4})),
		makePod("c", 3, 12, []ctr{{name: "main", units: 2}}, app(gpushare.CardUnits{0: 2})))
	root := e.withMPSRoot(t, 0)
	e.setIsolation(t, "mps")
	var pipes []string
	for _, n := range []int{4, 4, 2} {
		r, err := e.allocateResp(t, n)
		if err != nil {
			t.Fatal(err)
		}
		pipes = append(pipes, r.Envs[gpushare.EnvMPSPipeDirectory])
	}
	want := []string{mpsDir(root, 0, 4096) + "/pipe", mpsDir(root, 0, 4096) + "/pipe", mpsDir(root, 0, 2048) + "/pipe"}
	if d := cmp.Diff(want, pipes); d != "" {
		t.Errorf("pipe folders of a, b, c (-want,+got):\n%s", d)
	}
	entries, _, err := mps.Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	var caps []mps.Cap
	for _, en := range entries {
		caps = append(caps, en.Want.Cap)
	}
	if d := cmp.Diff([]mps.Cap{{PinnedMemMiB: 2048, ActiveThreadPct: 100}, {PinnedMemMiB: 4096, ActiveThreadPct: 100}}, caps); d != "" {
		t.Errorf("wanted daemons (-want,+got):\n%s", d)
	}
}

// TestReleaseMPSDaemons: a daemon a running pod holds stays wanted; one no pod holds is
// released once its last request is older than MPSReleaseGrace, not before; a pod that has
// ended holds nothing.
func TestReleaseMPSDaemons(t *testing.T) {
	ended := makePod("done", 2, 11, []ctr{{name: "main", units: 2}}, app(gpushare.CardUnits{0: 2}))
	ended.Status.Phase = "Succeeded"
	e := newTestEnv(t, "t4:2",
		makePod("a", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{1: 4})), ended)
	root := e.withMPSRoot(t)
	e.plugin.cfg.MPSReleaseGrace = time.Minute
	now := e.clock.Now()
	folder := func(card int, mib int64) mps.Folder {
		f, err := mps.FolderOf(root, uuid(card), mps.Cap{PinnedMemMiB: mib, ActiveThreadPct: 100})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	held, ofEnded, young, old := folder(1, 4096), folder(0, 2048), folder(0, 1024), folder(1, 1024)
	for f, at := range map[mps.Folder]time.Time{held: now.Add(-time.Hour), ofEnded: now.Add(-time.Hour), young: now.Add(-30 * time.Second), old: now.Add(-2 * time.Minute)} {
		if err := mps.Request(f, at); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.plugin.releaseMPSDaemons(); n != 2 {
		t.Errorf("released %d, want 2 (the ended pod's and the old one)", n)
	}
	entries, _, _ := mps.Scan(root)
	got := map[mps.Key]bool{}
	for _, en := range entries {
		got[en.Folder.Key()] = en.Want != nil
	}
	want := map[mps.Key]bool{held.Key(): true, ofEnded.Key(): false, young.Key(): true, old.Key(): false}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("wanted (-want,+got):\n%s", d)
	}
}

// TestAllocateMPSDaemonOverhead: with a daemon overhead set, a grant that needs a new daemon
// is refused when the card's grants and the daemons' overhead would pass the card's memory;
// a grant whose daemon is wanted already adds no overhead.
func TestAllocateMPSDaemonOverhead(t *testing.T) {
	// A T4 has 15079 MiB (14 GiB units). a, b, c and d hold 5, 4, 4 and 1 GiB: 14 GiB, 14336
	// MiB, leaving 743 MiB for daemons of 300 MiB each.
	e := newTestEnv(t, "t4:1",
		makePod("a", 1, 10, []ctr{{name: "main", units: 5}}, app(gpushare.CardUnits{0: 5})),
		makePod("b", 2, 11, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4})),
		makePod("c", 3, 12, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4})),
		makePod("d", 4, 13, []ctr{{name: "main", units: 1}}, app(gpushare.CardUnits{0: 1})))
	e.withMPSRoot(t, 0)
	e.plugin.cfg.MPSDaemonOverheadMiB = 300
	e.setIsolation(t, "mps")
	for _, n := range []int{5, 4, 4} { // a and b: a daemon each; c shares b's
		if _, err := e.allocateResp(t, n); err != nil {
			t.Fatalf("%d units: %v", n, err)
		}
	}
	// d needs a third daemon: 14336 + 3 × 300 > 15079.
	_, err := e.allocateResp(t, 1)
	if err == nil || !strings.Contains(err.Error(), "MPS daemon of its own on card 0") || !strings.Contains(err.Error(), "--mps-daemon-overhead-mib") {
		t.Errorf("d: %v, want a refusal naming the daemons' overhead", err)
	}
}

// withShare is a pod of one container "main" of units on card, with compute share v ("":
// none).
func withShare(name string, age, card, units int, v string) *corev1.Pod {
	p := makePod(name, age, 10+age, []ctr{{name: "main", units: int64(units)}}, app(gpushare.CardUnits{card: int64(units)}))
	if v != "" {
		p.Annotations[gpushare.AnnotationComputeShare] = "main=" + v
	}
	return p
}

// TestAllocateMPSComputeShare: a container's compute share is its daemon's active thread
// percentage: containers with the same grant and share use one daemon, the same grant with
// another share or none gets its own (none: every SM); a running pod holds the daemon of its
// share, so releasing keeps it.
func TestAllocateMPSComputeShare(t *testing.T) {
	e := newTestEnv(t, "t4:2", withShare("a", 1, 0, 4, "25"), withShare("b", 2, 0, 4, "25"), withShare("c", 3, 1, 4, ""), withShare("d", 4, 0, 2, "50"))
	root := e.withMPSRoot(t, 0, 1)
	e.setIsolation(t, "mps")
	var pipes []string
	for _, n := range []int{4, 4, 4, 2} {
		r, err := e.allocateResp(t, n)
		if err != nil {
			t.Fatal(err)
		}
		pipes = append(pipes, r.Envs[gpushare.EnvMPSPipeDirectory])
	}
	dir := func(card int, mib int64, pct int) string {
		return filepath.Join(root, uuid(card), mps.Cap{PinnedMemMiB: mib, ActiveThreadPct: pct}.Name(), "pipe")
	}
	want := []string{dir(0, 4096, 25), dir(0, 4096, 25), dir(1, 4096, 100), dir(0, 2048, 50)}
	if d := cmp.Diff(want, pipes); d != "" {
		t.Errorf("pipe folders of a, b, c, d (-want,+got):\n%s", d)
	}
	held := e.plugin.heldMPSDaemons()
	for _, k := range []mps.Key{
		{Card: uuid(0), Cap: mps.Cap{PinnedMemMiB: 4096, ActiveThreadPct: 25}},
		{Card: uuid(1), Cap: mps.Cap{PinnedMemMiB: 4096, ActiveThreadPct: 100}},
		{Card: uuid(0), Cap: mps.Cap{PinnedMemMiB: 2048, ActiveThreadPct: 50}},
	} {
		if !held[k] {
			t.Errorf("daemon %s not held; held: %v", k, held)
		}
	}
	if len(held) != 3 {
		t.Errorf("held %d daemons, want 3: %v", len(held), held)
	}
	e.plugin.cfg.MPSReleaseGrace = 0
	if n := e.plugin.releaseMPSDaemons(); n != 0 {
		t.Errorf("released %d daemons that running pods hold", n)
	}
}

// TestAllocateComputeShareOffMPS: a node not labelled mps refuses a container with a compute
// share, naming the annotation.
func TestAllocateComputeShareOffMPS(t *testing.T) {
	p := makePod("a", 1, 10, []ctr{{name: "main", units: 4}}, app(gpushare.CardUnits{0: 4}))
	p.Annotations[gpushare.AnnotationComputeShare] = "main=25"
	e := newTestEnv(t, "t4:2", p)
	_, err := e.allocateResp(t, 4)
	if err == nil || !strings.Contains(err.Error(), "compute share (gpushare.io/gpu-core: 25 percent)") {
		t.Errorf("Allocate = %v, want a refusal naming the compute share", err)
	}
}

// TestAllocateMPSComputeRoom: for pods bound without the schedulers, Allocate holds a card to
// their rule: shares up to 100 % together, and no container with a share beside one without.
// A bound pod holds its card by its allocation record, whether or not it was allocated yet.
func TestAllocateMPSComputeRoom(t *testing.T) {
	tests := []struct {
		name    string
		first   *corev1.Pod // bound to card 0, not allocated
		second  *corev1.Pod
		wantErr string
	}{
		{"shares within 100", withShare("a", 1, 0, 4, "50"), withShare("b", 2, 0, 2, "50"), ""},
		{"shares past 100", withShare("a", 1, 0, 4, "50"), withShare("b", 2, 0, 2, "55"), "would add up to 105%"},
		{"memory-only beside a share", withShare("a", 1, 0, 4, "25"), withShare("b", 2, 0, 2, ""), "it has no compute share and card 0"},
		{"a share beside memory-only", withShare("a", 1, 0, 4, ""), withShare("b", 2, 0, 2, "25"), "holds containers without one"},
		{"memory-only beside memory-only", withShare("a", 1, 0, 4, ""), withShare("b", 2, 0, 2, ""), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, "t4:2", tc.first, tc.second)
			e.withMPSRoot(t, 0)
			e.setIsolation(t, "mps")
			_, err := e.allocateResp(t, 2)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("second: %v, want %q", err, tc.wantErr)
			}
		})
	}
}
