package deviceplugin

import (
	"testing"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// TestInjectionOrderDecidesEnv: the CDI library applies devices' env in the order it is
// given them, so the allocation's NVIDIA_VISIBLE_DEVICES is the container's only after
// NVIDIA's device: the reason handOver names the allocation's device last.
func TestInjectionOrderDecidesEnv(t *testing.T) {
	nvidia := nodecards.DefaultCDIKind + "=" + uuid(0)
	alloc := nodecards.AllocationCDIKind + "=uid-p_main"
	tests := []struct {
		name    string
		devices []string
		want    string
	}{
		{name: "NVIDIA's first", devices: []string{nvidia, alloc}, want: uuid(0)},
		{name: "the allocation's first", devices: []string{alloc, nvidia}, want: "void"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeNVIDIASpec(t, dir, 1)
			specs := nodecards.CardSpecs{Dir: dir}
			if _, err := specs.WriteAllocationSpec("uid-p", "main", nil, map[string]string{gpushare.EnvVisibleDevices: uuid(0)}, nil); err != nil {
				t.Fatal(err)
			}
			env, _ := containerEnvAfterCDI(t, dir, tc.devices...)
			if got := env[gpushare.EnvVisibleDevices]; got != tc.want {
				t.Errorf("%s = %q, want %q", gpushare.EnvVisibleDevices, got, tc.want)
			}
		})
	}
}
