package nodecards

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestAllocationDeviceName(t *testing.T) {
	tests := []struct {
		uid       types.UID
		container string
		want      string // "" = refused
	}{
		{"6d1c3f0e-8a5b-4c39-9f0e-3a2b1c0d9e8f", "main", "6d1c3f0e-8a5b-4c39-9f0e-3a2b1c0d9e8f_main"},
		{"uid-p", "sidecar-1", "uid-p_sidecar-1"},
		{"", "main", ""},
		{"../etc", "main", ""},
		{"a_b", "main", ""}, // '_' would make the file name ambiguous
		{"uid-p", "bad/name", ""},
		{"uid-p", "main-", ""},
	}
	for _, tc := range tests {
		got, err := allocationDeviceName(tc.uid, tc.container)
		if got != tc.want || (err != nil) != (tc.want == "") {
			t.Errorf("allocationDeviceName(%q, %q) = %q, %v; want %q", tc.uid, tc.container, got, err, tc.want)
		}
	}
}
