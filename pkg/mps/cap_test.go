package mps

import (
	"strings"
	"testing"
)

func TestCapName(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Cap
		wantErr string
	}{
		{in: "m4096-t100", want: Cap{PinnedMemMiB: 4096, ActiveThreadPct: 100}},
		{in: "m1-t1", want: Cap{PinnedMemMiB: 1, ActiveThreadPct: 1}},
		{in: "m0-t100", wantErr: "want m<MiB>"},
		{in: "m4096-t101", wantErr: "percentage 101"},
		{in: "m99999999-t50", wantErr: "pinned memory"},
		{in: "m4096-t100/..", wantErr: "want m<MiB>"},
		{in: "../m1-t1", wantErr: "want m<MiB>"},
		{in: "m04096-t100", wantErr: "want m<MiB>"},
	} {
		got, err := ParseCapName(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseCapName(%q) = %v, %v; want error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want || got.Name() != tc.in {
			t.Errorf("ParseCapName(%q) = %v (%s), %v; want %v", tc.in, got, got.Name(), err, tc.want)
		}
	}
}

func TestFolderOfRefusesOddCards(t *testing.T) {
	ok := Cap{PinnedMemMiB: 1024, ActiveThreadPct: 100}
	for _, card := range []string{"", "..", "GPU-../../etc", "GPU-1234", "gpu-00000000-0000-0000-0000-000000000000/x"} {
		if f, err := FolderOf("/run/gpushare/mps", card, ok); err == nil {
			t.Errorf("FolderOf(%q) = %v, want an error", card, f)
		}
	}
	f, err := FolderOf("/run/gpushare/mps", "GPU-0123abcd-0000-1111-2222-333344445555", ok)
	if err != nil || f.Pipe() != "/run/gpushare/mps/GPU-0123abcd-0000-1111-2222-333344445555/m1024-t100/pipe" {
		t.Errorf("FolderOf = %v %q, %v", f, f.Pipe(), err)
	}
}
