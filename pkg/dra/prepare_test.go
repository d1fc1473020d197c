package dra

import (
	"context"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

func TestPrepareResourceClaims(t *testing.T) {
	const uid = "11111111-2222-4333-8444-555555555555"
	other := func(r resourceapi.DeviceRequestAllocationResult) resourceapi.DeviceRequestAllocationResult {
		r.Driver = "gpu.nvidia.com"
		return r
	}
	tests := []struct {
		name      string
		claim     *resourceapi.ResourceClaim
		unhealthy []string
		wantErr   string            // substring of the claim's error; "" : prepared
		wantEnv   map[string]string // checked keys of the spec's env
		wantCards []string          // simulated card mounts, by UUID
		wantUnits int64             // units recorded
	}{
		{
			name:      "4Gi on one card",
			claim:     claim(uid, "nb", result("gpu", "gpu-0", "4Gi")),
			wantEnv:   map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-aaaa", "CUDA_VISIBLE_DEVICES": "GPU-aaaa", "ALIYUN_COM_GPU_MEM_IDX": "0", "ALIYUN_COM_GPU_MEM_CONTAINER": "4", "ALIYUN_COM_GPU_MEM_DEV": "14"},
			wantCards: []string{"GPU-aaaa"},
			wantUnits: 4,
		},
		{
			name:      "two cards",
			claim:     claim(uid, "pair", result("gpus", "gpu-1", "2Gi"), result("gpus", "gpu-0", "2Gi")),
			wantEnv:   map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-bbbb,GPU-aaaa", "ALIYUN_COM_GPU_MEM_IDX": "1,0", "ALIYUN_COM_GPU_MEM_CONTAINER": "4"},
			wantCards: []string{"GPU-bbbb", "GPU-aaaa"},
			wantUnits: 4,
		},
		{
			name:      "another driver's results are not ours",
			claim:     claim(uid, "mixed", other(result("nic", "gpu-1", "")), result("gpu", "gpu-0", "1Gi")),
			wantEnv:   map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-aaaa", "ALIYUN_COM_GPU_MEM_CONTAINER": "1"},
			wantCards: []string{"GPU-aaaa"},
			wantUnits: 1,
		},
		{
			name:      "no consumed capacity is the whole card",
			claim:     claim(uid, "whole", result("gpu", "gpu-1", "")),
			wantEnv:   map[string]string{"ALIYUN_COM_GPU_MEM_CONTAINER": "14"},
			wantCards: []string{"GPU-bbbb"},
			wantUnits: 14,
		},
		{name: "more than the card has", claim: claim(uid, "big", result("gpu", "gpu-0", "15Gi")), wantErr: "asks 15 GiB units of card 0, which has 14"},
		{name: "two results past one card", claim: claim(uid, "big2", result("a", "gpu-0", "8Gi"), result("b", "gpu-0", "8Gi")), wantErr: "asks 16 GiB units of card 0"},
		{name: "not whole units", claim: claim(uid, "half", result("gpu", "gpu-0", "1536Mi")), wantErr: "not a positive whole number of GiB units"},
		{name: "an unhealthy card", claim: claim(uid, "sick", result("gpu", "gpu-1", "1Gi")), unhealthy: []string{"GPU-bbbb"}, wantErr: "card 1 (GPU-bbbb) is unhealthy"},
		{name: "a device this node does not have", claim: claim(uid, "ghost", result("gpu", "gpu-7", "1Gi")), wantErr: "no card of node node-a"},
		{name: "another node's pool", claim: claim(uid, "away", func() resourceapi.DeviceRequestAllocationResult {
			r := result("gpu", "gpu-0", "1Gi")
			r.Pool = "node-b"
			return r
		}()), wantErr: "no card of node node-a"},
		{name: "not allocated", claim: claim(uid, "pending"), wantErr: "not allocated"},
		{name: "only other drivers", claim: claim(uid, "nic", other(result("nic", "gpu-0", ""))), wantErr: "no device of driver " + gpushare.DRADriverName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t.TempDir(), tt.unhealthy...)
			d := newTestDriver(t, cfg)
			res, err := d.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{tt.claim})
			if err != nil {
				t.Fatalf("PrepareResourceClaims: %v", err)
			}
			got, ok := res[types.UID(uid)]
			if !ok || len(res) != 1 {
				t.Fatalf("results %v: want one for %s", res, uid)
			}
			if tt.wantErr != "" {
				if got.Err == nil || !strings.Contains(got.Err.Error(), tt.wantErr) {
					t.Fatalf("claim error %v, want it to contain %q", got.Err, tt.wantErr)
				}
				if len(d.prepared) != 0 {
					t.Errorf("a failed claim was recorded: %v", d.prepared)
				}
				if _, err := cdiapi.ReadSpec(nodecards.ClaimSpecPath(cfg.Specs.Dir, types.UID(uid)), 0); err == nil {
					t.Errorf("a failed claim left a CDI spec")
				}
				return
			}
			if got.Err != nil {
				t.Fatalf("claim error %v", got.Err)
			}
			wantID := nodecards.ClaimCDIKind + "=" + uid
			if len(got.Devices) == 0 || len(got.Devices[0].CDIDeviceIDs) != 1 || got.Devices[0].CDIDeviceIDs[0] != wantID {
				t.Fatalf("devices %+v: want the first to carry %s", got.Devices, wantID)
			}
			for i, dev := range got.Devices[1:] {
				if len(dev.CDIDeviceIDs) != 0 {
					t.Errorf("device %d carries CDI IDs %v too", i+1, dev.CDIDeviceIDs)
				}
			}
			spec, err := cdiapi.ReadSpec(nodecards.ClaimSpecPath(cfg.Specs.Dir, types.UID(uid)), 0)
			if err != nil {
				t.Fatalf("the CDI library does not read the claim's spec: %v", err)
			}
			dev := spec.GetDevice(uid)
			if dev == nil {
				t.Fatalf("spec has no device %s", uid)
			}
			env := map[string]string{}
			for _, kv := range dev.ContainerEdits.Env {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			for k, v := range tt.wantEnv {
				if env[k] != v {
					t.Errorf("env %s=%q, want %q", k, env[k], v)
				}
			}
			var mounts []string
			for _, m := range dev.ContainerEdits.Mounts {
				mounts = append(mounts, m.ContainerPath[strings.LastIndex(m.ContainerPath, "/")+1:])
			}
			if strings.Join(mounts, ",") != strings.Join(tt.wantCards, ",") {
				t.Errorf("cards mounted %v, want %v", mounts, tt.wantCards)
			}
			var units int64
			for _, dev := range d.prepared[types.UID(uid)].Devices {
				units += dev.Units
			}
			if units != tt.wantUnits {
				t.Errorf("recorded %d units, want %d", units, tt.wantUnits)
			}
		})
	}
}

// TestPrepareCountsPreparedClaims: the driver is the last line of defence against two
// claims holding more of a card than it has, across a restart too.
func TestPrepareCountsPreparedClaims(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	d := newTestDriver(t, cfg)
	first := claim("aaaaaaaa-0000-4000-8000-000000000001", "first", result("gpu", "gpu-0", "12Gi"))
	second := claim("aaaaaaaa-0000-4000-8000-000000000002", "second", result("gpu", "gpu-0", "4Gi"))
	third := claim("aaaaaaaa-0000-4000-8000-000000000003", "third", result("gpu", "gpu-0", "2Gi"))
	res, _ := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{first})
	if err := res[first.UID].Err; err != nil {
		t.Fatal(err)
	}
	again, _ := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{first})
	if again[first.UID].Err != nil || again[first.UID].Devices[0].CDIDeviceIDs[0] != res[first.UID].Devices[0].CDIDeviceIDs[0] {
		t.Fatalf("a repeated prepare answered %+v, want %+v", again[first.UID], res[first.UID])
	}

	restarted := newTestDriver(t, cfg)
	res, _ = restarted.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{second, third})
	if err := res[second.UID].Err; err == nil || !strings.Contains(err.Error(), "claims already prepared hold 12 of its 14") {
		t.Errorf("second claim after a restart: %v, want it refused for the first claim's 12 units", err)
	}
	if err := res[third.UID].Err; err != nil {
		t.Errorf("third claim fits the 2 units left: %v", err)
	}
}
