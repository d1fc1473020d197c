package deviceplugin

import "testing"

// TestConfigChecksCDIKind: with cdi-cri a kind that is not vendor/class is refused at start,
// not turned into device names the runtime rejects at every pod start.
func TestConfigChecksCDIKind(t *testing.T) {
	for _, tc := range []struct {
		strategy DeviceListStrategy
		kind     string
		wantErr  bool
	}{
		{DeviceListCDICRI, "", false},
		{DeviceListCDICRI, "example.com/card", false},
		{DeviceListCDICRI, "nvidia.com", true},
		{DeviceListCDICRI, "nvidia.com/gpu=x", true},
		{DeviceListEnvVar, "not a kind", false}, // unused with envvar
	} {
		var cfg Config
		cfg.DeviceListStrategy, cfg.CDIKind = tc.strategy, tc.kind
		err := checkCDIConfig(&cfg)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s %q: error %v, want error %v", tc.strategy, tc.kind, err, tc.wantErr)
		}
	}
}
