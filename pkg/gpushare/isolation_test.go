package gpushare

import "testing"

func TestParseIsolation(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Isolation
		wantErr bool
	}{
		{in: "", want: IsolationNone},
		{in: "none", want: IsolationNone},
		{in: "mps", want: IsolationMPS},
		{in: "MPS", wantErr: true},
		{in: "hami", wantErr: true},
		{in: " mps", wantErr: true},
	} {
		got, err := ParseIsolation(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ParseIsolation(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}
