package dra

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// TestNewReconcilesSpecs: after a crash between a claim's spec and its checkpoint entry,
// the next start leaves neither a spec without an entry nor an entry without a spec, and
// touches no pair of both.
func TestNewReconcilesSpecs(t *testing.T) {
	const a, b, c = "cccccccc-0000-4000-8000-00000000000a", "cccccccc-0000-4000-8000-00000000000b", "cccccccc-0000-4000-8000-00000000000c"
	claims := map[string]*resourceapi.ResourceClaim{
		a: claim(a, "a", result("gpu", "gpu-0", "4Gi")),
		b: claim(b, "b", result("gpu", "gpu-1", "2Gi"), result("gpu", "gpu-0", "1Gi")),
	}
	tests := []struct {
		name     string
		prepared []string // claims prepared (checkpointed, with their specs)
		lost     []string // of those, specs removed behind the plugin's back
		leftover []string // specs written with no checkpoint entry
		want     []string // specs after the restart
	}{
		{name: "leftover spec removed", leftover: []string{c}},
		{name: "missing spec rewritten", prepared: []string{a}, lost: []string{a}, want: []string{a}},
		{name: "pair untouched", prepared: []string{a}, want: []string{a}},
		{name: "all at once", prepared: []string{a, b}, lost: []string{b}, leftover: []string{c}, want: []string{a, b}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir())
			dir := cfg.Specs.Dir
			d := newTestDriver(t, cfg)
			written := map[string][]byte{} // spec content as prepare wrote it
			for _, uid := range tt.prepared {
				res, _ := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{claims[uid]})
				if err := res[types.UID(uid)].Err; err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(nodecards.ClaimSpecPath(dir, types.UID(uid)))
				if err != nil {
					t.Fatal(err)
				}
				written[uid] = b
			}
			for _, uid := range tt.lost {
				if err := os.Remove(nodecards.ClaimSpecPath(dir, types.UID(uid))); err != nil {
					t.Fatal(err)
				}
			}
			for _, uid := range tt.leftover {
				if _, err := cfg.Specs.WriteClaimSpec(types.UID(uid), []gpushare.Device{testInventory().Devices[0]}, nil, nil); err != nil {
					t.Fatal(err)
				}
			}
			// A spec left in place keeps this time; one written again gets a new one.
			old := time.Now().Add(-time.Hour).Truncate(time.Second)
			for _, uid := range tt.prepared {
				if !slices.Contains(tt.lost, uid) {
					if err := os.Chtimes(nodecards.ClaimSpecPath(dir, types.UID(uid)), old, old); err != nil {
						t.Fatal(err)
					}
				}
			}

			restarted := newTestDriver(t, cfg)

			got, err := nodecards.ClaimSpecUIDs(dir)
			if err != nil {
				t.Fatal(err)
			}
			var want []types.UID
			for _, uid := range tt.want {
				want = append(want, types.UID(uid))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("specs after the restart %v, want %v", got, want)
			}
			for _, uid := range tt.want {
				path := nodecards.ClaimSpecPath(dir, types.UID(uid))
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != string(written[uid]) {
					t.Errorf("spec of %s after the restart:\n%s\nwant what prepare wrote:\n%s", uid, b, written[uid])
				}
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if lost := slices.Contains(tt.lost, uid); !lost && !fi.ModTime().Equal(old) {
					t.Errorf("spec of %s was written again (modified %v), want it untouched", uid, fi.ModTime())
				}
			}
			if len(restarted.prepared) != len(tt.prepared) {
				t.Errorf("restarted driver holds %d claims, want %d", len(restarted.prepared), len(tt.prepared))
			}
		})
	}
}
