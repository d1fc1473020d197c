package noderuntime

import (
	"context"
	"strings"
	"testing"
)

// TestOpenNVML: the simulator's files need a simulated node, one simulated source at a
// time; a --simulate spec opens the simulator with its cards.
func TestOpenNVML(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      NVMLOptions
		wantCards int
		wantErr   string
	}{
		{name: "faults file without a simulated node", opts: NVMLOptions{FaultsFile: "/f"}, wantErr: "need --simulate or --simulate-file"},
		{name: "processes file without a simulated node", opts: NVMLOptions{SimulateProcesses: "/p"}, wantErr: "need --simulate or --simulate-file"},
		{name: "both simulated sources", opts: NVMLOptions{Simulate: "t4", SimulateFile: "/s.yaml"}, wantErr: "not both"},
		{name: "invalid spec", opts: NVMLOptions{Simulate: "no-such-model"}, wantErr: "no-such-model"},
		{name: "simulated", opts: NVMLOptions{Simulate: "t4:2"}, wantCards: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nv, simulated, err := OpenNVML(context.Background(), testNode, tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("OpenNVML: %v, want an error saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !simulated {
				t.Fatalf("OpenNVML = %v, simulated %v; want the simulator", err, simulated)
			}
			defer func() { _ = nv.Shutdown() }()
			devs, err := nv.Devices()
			if err != nil || len(devs) != tc.wantCards {
				t.Errorf("devices %v, %v; want %d", devs, err, tc.wantCards)
			}
			if err := LimitSupport(nv, true, ""); err != nil {
				t.Errorf("LimitSupport of simulated cards: %v, want nil", err)
			}
		})
	}
}
