package nvml

import (
	"strings"
	"testing"
)

func TestParseSimProcesses(t *testing.T) {
	devs := []Device{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}}
	tests := []struct {
		name, in string
		wantN    int
		wantErr  string
	}{
		{name: "index and uuid", in: "- {card: 0, pid: 1, usedMiB: 10}\n- {card: GPU-b, pid: 2}\n", wantN: 2},
		{name: "empty file", in: "", wantN: 0},
		{name: "unknown card index", in: "- {card: 2, pid: 1}\n", wantErr: "no card 2"},
		{name: "unknown card uuid", in: "- {card: GPU-z, pid: 1}\n", wantErr: "no card GPU-z"},
		{name: "negative card", in: "- {card: -1, pid: 1}\n", wantErr: "card index or UUID"},
		{name: "zero pid", in: "- {card: 0, pid: 0}\n", wantErr: "pid must be positive"},
		{name: "negative pid", in: "- {card: 0, pid: -5}\n", wantErr: "pid"},
		{name: "negative used", in: "- {card: 0, pid: 1, usedMiB: -1}\n", wantErr: "out of range"},
		{name: "absurd used", in: "- {card: 0, pid: 1, usedMiB: 9999999999999}\n", wantErr: "out of range"},
		{name: "unknown field", in: "- {card: 0, pid: 1, used: 3}\n", wantErr: "unknown field"},
		{name: "types", in: "- {card: 0, pid: 1, type: mps}\n- {card: 0, pid: 2, type: server}\n- {card: 1, pid: 3, type: direct}\n", wantN: 3},
		{name: "unknown type", in: "- {card: 0, pid: 1, type: M+C}\n", wantErr: `type "M+C": want direct, mps or server`},
		{name: "smUtil", in: "- {card: 0, pid: 1, smUtil: 0}\n- {card: 0, pid: 2, smUtil: 100}\n", wantN: 2},
		{name: "smUtil above 100", in: "- {card: 0, pid: 1, smUtil: 101}\n", wantErr: "smUtil 101 out of range"},
		{name: "negative smUtil", in: "- {card: 0, pid: 1, smUtil: -1}\n", wantErr: "smUtil"},
		{name: "not a list", in: "card: 0\n", wantErr: "cannot unmarshal"},
		{name: "too large", in: strings.Repeat("#", maxSimProcessesBytes+1), wantErr: "at most"},
		{name: "too many", in: strings.Repeat("- {card: 0, pid: 1}\n", maxSimProcesses+1), wantErr: "at most"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSimProcesses([]byte(tc.in), devs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(got) != tc.wantN {
				t.Fatalf("got %d entries, %v; want %d", len(got), err, tc.wantN)
			}
		})
	}
}
