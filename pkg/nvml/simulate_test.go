package nvml

import "testing"

func TestSimulate(t *testing.T) {
	tests := []struct {
		spec      string
		wantCards int
		wantErr   bool
	}{
		{spec: "t4:2", wantCards: 2},
		{spec: "t4,a100-80gb", wantCards: 2},
		{spec: "nope", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			sim, nv, err := Simulate("node-a", tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Simulate(%q) error %v, want error %v", tt.spec, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			devs, err := nv.Devices()
			if err != nil || len(devs) != tt.wantCards || sim == nil {
				t.Errorf("devices %v, %v; want %d cards and a simulator", devs, err, tt.wantCards)
			}
		})
	}
}
