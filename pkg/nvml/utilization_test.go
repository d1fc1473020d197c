package nvml

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMeanByPID(t *testing.T) {
	tests := []struct {
		name    string
		samples []utilSample
		want    []ProcessUtilization
	}{
		{name: "none", want: []ProcessUtilization{}},
		{
			name:    "one sample each, PID order",
			samples: []utilSample{{pid: 9, sm: 53, mem: 20}, {pid: 4, sm: 47, mem: 10}},
			want:    []ProcessUtilization{{PID: 4, SMPercent: 47, MemPercent: 10}, {PID: 9, SMPercent: 53, MemPercent: 20}},
		},
		{
			name:    "several samples of a PID: their mean, rounded down",
			samples: []utilSample{{pid: 4, sm: 40}, {pid: 4, sm: 61}, {pid: 4, sm: 0}},
			want:    []ProcessUtilization{{PID: 4, SMPercent: 33}},
		},
		{
			name:    "above 100 counts 100",
			samples: []utilSample{{pid: 4, sm: 250, mem: 101}, {pid: 4, sm: 50, mem: 99}},
			want:    []ProcessUtilization{{PID: 4, SMPercent: 75, MemPercent: 99}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, meanByPID(tc.samples)); diff != "" {
				t.Errorf("meanByPID (-want,+got):\n%s", diff)
			}
		})
	}
}
