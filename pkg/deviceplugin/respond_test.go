package deviceplugin

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// TestDeviceListStrategy: envvar hands the card over as NVIDIA_VISIBLE_DEVICES; cdi-cri as a
// CDI device name, without the variable; the gpu-mem variables stay in both.
func TestDeviceListStrategy(t *testing.T) {
	tests := []struct {
		strategy DeviceListStrategy
		kind     string
		wantEnv  bool
		wantCDI  []string
	}{
		{strategy: DeviceListEnvVar, wantEnv: true},
		{strategy: DeviceListCDICRI, wantCDI: []string{"nvidia.com/gpu=" + uuid(1)}},
		{strategy: DeviceListCDICRI, kind: "example.com/card", wantCDI: []string{"example.com/card=" + uuid(1)}},
	}
	for _, tc := range tests {
		t.Run(string(tc.strategy)+"/"+tc.kind, func(t *testing.T) {
			e := newTestEnv(t, "t4:2", makePod("p", 1, 10, []ctr{{name: "main", units: 6}}, app(gpushare.CardUnits{1: 6})))
			e.plugin.cfg.DeviceListStrategy = tc.strategy
			if tc.kind != "" {
				e.plugin.cfg.CDIKind = tc.kind
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := e.plugin.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: fakeIDs(6)}}})
			if err != nil {
				t.Fatal(err)
			}
			cr := resp.ContainerResponses[0]
			_, hasEnv := cr.Envs[gpushare.EnvVisibleDevices]
			if hasEnv != tc.wantEnv || (hasEnv && cr.Envs[gpushare.EnvVisibleDevices] != uuid(1)) {
				t.Errorf("%s=%q (set %v), want set %v to %s", gpushare.EnvVisibleDevices, cr.Envs[gpushare.EnvVisibleDevices], hasEnv, tc.wantEnv, uuid(1))
			}
			if cr.Envs[gpushare.EnvIndex] != "1" || cr.Envs[gpushare.EnvContainerUnits] != "6" {
				t.Errorf("gpu-mem variables %v, want card 1 and 6 units", cr.Envs)
			}
			var got []string
			for _, d := range cr.CdiDevices {
				got = append(got, d.Name)
			}
			if d := cmp.Diff(tc.wantCDI, got); d != "" {
				t.Errorf("CDI devices (-want,+got):\n%s", d)
			}
		})
	}
	if _, err := ParseDeviceListStrategy("volume-mounts"); err == nil {
		t.Error("ParseDeviceListStrategy accepted volume-mounts")
	}
}
