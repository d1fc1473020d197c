package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpushare/gpushare/pkg/probe"
)

// TestRun: the exit status and the two lines of a container with no card and no driver (the
// sibling container on a node of simulated cards), and the misuses that stop it first.
func TestRun(t *testing.T) {
	t.Setenv("NVIDIA_VISIBLE_DEVICES", "")
	tests := []struct {
		name    string
		args    []string
		want    int
		wantOut string
		wantErr string
	}{
		{name: "sibling", args: []string{"--expect-cards=0", "--isolation=limit", "--libcuda=/nonexistent/libcuda.so.1"}, want: 0, wantOut: `"verdict":"enforced"`},
		{name: "bad label", args: []string{"--isolation=MPS"}, want: 2, wantErr: `gpushare.io/isolation="MPS"`},
		{name: "bad unit", args: []string{"--unit=2TB"}, want: 2, wantErr: "memory unit"},
		{name: "negative count", args: []string{"--expect-cards=-1"}, want: 2, wantErr: "--expect-cards -1"},
		{name: "unknown flag", args: []string{"--nope"}, want: 2, wantErr: "unknown flag"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := run(tc.args, &out, &errOut); got != tc.want {
				t.Errorf("exit %d, want %d; stdout %s stderr %s", got, tc.want, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) || !strings.Contains(errOut.String(), tc.wantErr) {
				t.Errorf("stdout %q (want %q), stderr %q (want %q)", out.String(), tc.wantOut, errOut.String(), tc.wantErr)
			}
			if tc.want == 0 {
				if _, err := probe.ParseResult(out.String()); err != nil {
					t.Errorf("ParseResult: %v", err)
				}
			}
		})
	}
}
