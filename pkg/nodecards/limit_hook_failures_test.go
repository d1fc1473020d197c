package nodecards

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpushare/gpushare/pkg/limithook"
)

// zeroCounts is every reason at 0.
func zeroCounts() map[string]float64 {
	out := map[string]float64{ReasonUnreadable: 0}
	for _, r := range limithook.Reasons() {
		out[r] = 0
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Each record counts once under its reason and goes; what is no record counts as
// unreadable and goes too; a temporary file the hook may still be writing stays.
func TestLimitHookFailures(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		// setup fills the folder dir (which does not exist yet); nil: no folder.
		setup func(t *testing.T, dir string)
		want  map[string]float64 // the counts that are not 0
		left  []string           // what stays in the folder
	}{
		{name: "missing folder"},
		{name: "empty folder", setup: func(*testing.T, string) {}},
		{
			name: "one record of each reason",
			setup: func(t *testing.T, dir string) {
				for _, r := range limithook.Reasons() {
					if _, err := limithook.WriteFailure(dir, limithook.FailureRecord{Reason: r, Card: "GPU-a", ContainerID: "c", Time: at, Message: "m"}); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: map[string]float64{"deadline": 1, "unsupported": 1, "cgroup": 1, "pod_mismatch": 1, "nvml": 1, "state": 1, "args": 1, "other": 1},
		},
		{
			name: "two deadlines",
			setup: func(t *testing.T, dir string) {
				for range 2 {
					if _, err := limithook.WriteFailure(dir, limithook.FailureRecord{Reason: limithook.ReasonDeadline, Time: at}); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: map[string]float64{"deadline": 2},
		},
		{name: "garbage", setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "1-a.json"), "\x00\xffnot json") }, want: map[string]float64{ReasonUnreadable: 1}},
		{name: "empty file", setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "1-a.json"), "") }, want: map[string]float64{ReasonUnreadable: 1}},
		{
			name: "unknown reason",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "1-a.json"), `{"reason":"pwned\n{x=\"1\"}"}`)
			},
			want: map[string]float64{ReasonUnreadable: 1},
		},
		{
			name: "too large",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "1-a.json"), `{"reason":"nvml","message":"`+strings.Repeat("x", limithook.MaxFailureRecordBytes)+`"}`)
			},
			want: map[string]float64{ReasonUnreadable: 1},
		},
		{name: "another name", setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "notes.txt"), `{"reason":"nvml"}`) }, want: map[string]float64{ReasonUnreadable: 1}},
		{
			name: "a folder and a link",
			setup: func(t *testing.T, dir string) {
				if err := os.MkdirAll(filepath.Join(dir, "sub.json", "x"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link.json")); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]float64{ReasonUnreadable: 2},
		},
		{
			name:  "a record being written",
			setup: func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, ".1-a.json.123.tmp"), `{"rea`) },
			left:  []string{".1-a.json.123.tmp"},
		},
		{
			name: "a killed hook's temporary file",
			setup: func(t *testing.T, dir string) {
				p := filepath.Join(dir, ".1-a.json.123.tmp")
				writeFile(t, p, `{"rea`)
				old := time.Now().Add(-time.Hour)
				if err := os.Chtimes(p, old, old); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]float64{ReasonUnreadable: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "failures")
			if tc.setup != nil {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				tc.setup(t, dir)
			}
			f := NewLimitHookFailures(dir, "node-a")
			want := zeroCounts()
			for r, n := range tc.want {
				want[r] = n
			}
			for i := range 2 { // the second read counts nothing again
				got, err := f.Counts()
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("read %d: counts (-want +got):\n%s", i+1, d)
				}
			}
			var left []string
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				left = append(left, e.Name())
			}
			if d := cmp.Diff(tc.left, left); d != "" {
				t.Errorf("left in the folder (-want +got):\n%s", d)
			}
		})
	}
}

// The counter as /metrics shows it: every reason, a failure the hook recorded counted once.
func TestLimitHookFailuresMetric(t *testing.T) {
	dir := t.TempDir()
	f := NewLimitHookFailures(dir, "node-a")
	if _, err := limithook.WriteFailure(dir, limithook.FailureRecord{Reason: limithook.ReasonDeadline, Card: "GPU-a", Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP gpushare_limit_hook_failures_total Failures of gpushare-limit-hook on this node, by reason (the hook's failure records; unreadable: a record that could not be read).
# TYPE gpushare_limit_hook_failures_total counter
gpushare_limit_hook_failures_total{node="node-a",reason="args"} 0
gpushare_limit_hook_failures_total{node="node-a",reason="cgroup"} 0
gpushare_limit_hook_failures_total{node="node-a",reason="deadline"} 1
gpushare_limit_hook_failures_total{node="node-a",reason="nvml"} 0
gpushare_limit_hook_failures_total{node="node-a",reason="other"} 0
gpushare_limit_hook_failures_total{node="node-a",reason="pod_mismatch"} 0
gpushare_limit_hook_failures_total{node="node-a",reason="state"} 0
gpushare_limit_hook_failures_total{node="node-a",reason="unreadable"} 0
gpushare_limit_hook_failures_total{node="node-a",reason="unsupported"} 0
`
	for range 2 {
		if err := testutil.CollectAndCompare(f, strings.NewReader(want)); err != nil {
			t.Error(err)
		}
	}
}
