package gpushare

import "testing"

func TestParseUnit(t *testing.T) {
	tests := []struct {
		in      string
		wantMiB int64
		wantStr string
		wantErr bool
	}{
		{in: "GiB", wantMiB: 1024, wantStr: "GiB"},
		{in: "MiB", wantMiB: 1, wantStr: "MiB"},
		{in: "256MiB", wantMiB: 256, wantStr: "256MiB"},
		{in: "2GiB", wantMiB: 2048, wantStr: "2GiB"},
		{in: "1024MiB", wantMiB: 1024, wantStr: "GiB"}, // same size, canonical name
		{in: " GiB ", wantMiB: 1024, wantStr: "GiB"},
		{in: "Gi", wantErr: true},
		{in: "0MiB", wantErr: true},
		{in: "-1GiB", wantErr: true},
		{in: "xGiB", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			u, err := ParseUnit(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseUnit(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if u.MiB != tc.wantMiB || u.String() != tc.wantStr {
				t.Errorf("ParseUnit(%q) = %d MiB %q, want %d MiB %q", tc.in, u.MiB, u.String(), tc.wantMiB, tc.wantStr)
			}
		})
	}
}

func TestUnitsOf(t *testing.T) {
	tests := []struct {
		name string
		unit Unit
		mib  int64
		want int64
	}{
		{name: "T4 in GiB: floor(15079/1024)", unit: GiB, mib: 15079, want: 14},
		{name: "A100-80GB in GiB", unit: GiB, mib: 81920, want: 80},
		{name: "T4 in MiB", unit: Unit{MiB: 1}, mib: 15079, want: 15079},
		{name: "T4 in 256MiB: floor(15079/256)", unit: Unit{MiB: 256}, mib: 15079, want: 58},
		{name: "zero unit means GiB", unit: Unit{}, mib: 2048, want: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.unit.UnitsOf(tc.mib); got != tc.want {
				t.Errorf("UnitsOf(%d) = %d, want %d", tc.mib, got, tc.want)
			}
		})
	}
}
