package scale

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseProc(t *testing.T) {
	status := "Name:\textender\nVmHWM:\t  81920 kB\nVmRSS:\t  40960 kB\nThreads:\t9\n"
	// utime 250 ticks, stime 50 ticks; the command name holds a space and a ')'.
	stat := "4242 (ext ender)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 100 1000 10"
	tests := []struct {
		name    string
		status  string
		stat    string
		want    ProcStats
		wantErr bool
	}{
		{"ok", status, stat, ProcStats{RSSBytes: 40 << 20, HWMBytes: 80 << 20, CPUSeconds: 3}, false},
		{"no VmRSS", "Name:\tkthreadd\n", stat, ProcStats{}, true},
		{"bad unit", "VmRSS:\t 1 MB\n", stat, ProcStats{}, true},
		{"short stat", status, "1 (x) S 1 2", ProcStats{}, true},
		{"no parenthesis", status, "1 x S", ProcStats{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProc(tc.status, tc.stat)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestReadProcSelf(t *testing.T) {
	s, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSBytes <= 0 || s.HWMBytes < s.RSSBytes {
		t.Errorf("own stats implausible: %+v", s)
	}
}
