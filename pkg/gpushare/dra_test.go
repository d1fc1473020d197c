package gpushare

import "testing"

func TestCheckBackend(t *testing.T) {
	tests := []struct {
		name    string
		labels  map[string]string
		want    Backend
		wantErr bool
	}{
		{name: "no label is the device plugin", labels: nil, want: BackendDevicePlugin},
		{name: "no label refuses dra", labels: nil, want: BackendDRA, wantErr: true},
		{name: "dra label accepts dra", labels: map[string]string{LabelBackend: "dra"}, want: BackendDRA},
		{name: "dra label refuses the device plugin", labels: map[string]string{LabelBackend: "dra"}, want: BackendDevicePlugin, wantErr: true},
		{name: "explicit device plugin", labels: map[string]string{LabelBackend: "device-plugin"}, want: BackendDevicePlugin},
		{name: "unknown value", labels: map[string]string{LabelBackend: "both"}, want: BackendDevicePlugin, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckBackend(tt.labels, tt.want)
			if (err != nil) != tt.wantErr {
				t.Fatalf("CheckBackend(%v, %s) = %v, want error %v", tt.labels, tt.want, err, tt.wantErr)
			}
		})
	}
}
