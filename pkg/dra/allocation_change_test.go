package dra

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/nodecards"
)

// TestPrepareRefusesAChangedAllocation: a claim prepared before is answered from the
// checkpoint only while its allocation is the one prepared; allocated again differently
// under the same UID, it fails with allocation_changed and the prepared claim stays as it was.
func TestPrepareRefusesAChangedAllocation(t *testing.T) {
	const uid = "dddddddd-0000-4000-8000-000000000001"
	first := result("gpu", "gpu-0", "4Gi")
	otherShare := func(r resourceapi.DeviceRequestAllocationResult) resourceapi.DeviceRequestAllocationResult {
		s := types.UID("share-new")
		r.ShareID = &s
		return r
	}
	tests := []struct {
		name    string
		again   *resourceapi.ResourceClaim
		restart bool // the plugin restarts before the repeated prepare
		wantErr bool
	}{
		{name: "same allocation", again: claim(uid, "nb", first)},
		{name: "same allocation after a restart", again: claim(uid, "nb", first), restart: true},
		{name: "another card", again: claim(uid, "nb", result("gpu", "gpu-1", "4Gi")), wantErr: true},
		{name: "another card after a restart", again: claim(uid, "nb", result("gpu", "gpu-1", "4Gi")), restart: true, wantErr: true},
		{name: "other memory", again: claim(uid, "nb", result("gpu", "gpu-0", "2Gi")), wantErr: true},
		{name: "the whole card", again: claim(uid, "nb", result("gpu", "gpu-0", "")), wantErr: true},
		{name: "another share", again: claim(uid, "nb", otherShare(first)), wantErr: true},
		{name: "another request", again: claim(uid, "nb", result("big", "gpu-0", "4Gi")), wantErr: true},
		{name: "a result more", again: claim(uid, "nb", first, result("gpu", "gpu-1", "1Gi")), wantErr: true},
		{name: "a device this node does not have", again: claim(uid, "nb", result("gpu", "gpu-7", "4Gi")), wantErr: true},
		{name: "not allocated", again: claim(uid, "nb"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := testConfig(t.TempDir())
			d := newTestDriver(t, cfg)
			res, _ := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim(uid, "nb", first)})
			if err := res[uid].Err; err != nil {
				t.Fatal(err)
			}
			spec, err := os.ReadFile(nodecards.ClaimSpecPath(cfg.Specs.Dir, uid))
			if err != nil {
				t.Fatal(err)
			}
			if tt.restart {
				d = newTestDriver(t, cfg)
			}
			before := d.prepared[uid]
			res, _ = d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{tt.again})
			got := res[uid]
			if !tt.wantErr {
				if got.Err != nil || len(got.Devices) != 1 || got.Devices[0].DeviceName != "gpu-0" {
					t.Fatalf("repeated prepare: %+v; want the prepared answer on gpu-0", got)
				}
				return
			}
			if got.Err == nil {
				t.Fatalf("repeated prepare answered %+v; want allocation_changed", got.Devices)
			}
			if r := prepareReason(got.Err); r != "allocation_changed" {
				t.Errorf("reason %q, want allocation_changed (%v)", r, got.Err)
			}
			if !strings.Contains(got.Err.Error(), "allocation changed") || !strings.Contains(got.Err.Error(), "gpu on node-a/gpu-0 share share-gpu-gpu-0, 4 units") {
				t.Errorf("error %q: want it to say the allocation changed and name the prepared one", got.Err)
			}
			if after, ok := d.prepared[uid]; !ok || !cmp.Equal(after, before) {
				t.Errorf("prepared claim %+v after the refusal, want it kept as %+v", after, before)
			}
			if b, err := os.ReadFile(nodecards.ClaimSpecPath(cfg.Specs.Dir, uid)); err != nil || string(b) != string(spec) {
				t.Errorf("the prepared claim's spec changed or went: %v", err)
			}
		})
	}
}
