package limithook

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// readFailures reads every record in dir, failing t on a file that is not one.
func readFailures(t *testing.T, dir string) []FailureRecord {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []FailureRecord
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), FailureRecordSuffix) || strings.HasPrefix(e.Name(), ".") {
			t.Errorf("failure folder holds %s, not a record", e.Name())
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var r FailureRecord
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("record %s: %v", e.Name(), err)
		}
		out = append(out, r)
	}
	return out
}

func TestWriteFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "failures") // created by WriteFailure
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	r := FailureRecord{Reason: ReasonNVML, Card: "GPU-a", ContainerID: containerID, Time: at, Message: "card GPU-a: Unknown Error"}
	path, err := WriteFailure(dir, r)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) != dir {
		t.Errorf("record at %s, want in %s", path, dir)
	}
	if d := cmp.Diff([]FailureRecord{r}, readFailures(t, dir)); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
}

// A huge message, even one JSON escapes to six times its bytes, still gives a small record.
func TestWriteFailureBoundsTheRecord(t *testing.T) {
	dir := t.TempDir()
	for _, msg := range []string{strings.Repeat("x", 1<<20), strings.Repeat("\x01", 1<<20), strings.Repeat("é", 1<<19)} {
		path, err := WriteFailure(dir, FailureRecord{Reason: ReasonOther, ContainerID: strings.Repeat("\x02", 1<<12), Message: msg})
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > MaxFailureRecordBytes {
			t.Errorf("record of %d bytes, want at most %d", fi.Size(), MaxFailureRecordBytes)
		}
	}
	readFailures(t, dir) // every one is valid JSON
}

func TestWriteFailureStopsAtAFullFolder(t *testing.T) {
	dir := t.TempDir()
	for i := range MaxFailureRecords {
		mustWrite(t, filepath.Join(dir, strings.Repeat("r", 1+i%50)+string(rune('a'+i/50))+".json"), "{}")
	}
	if _, err := WriteFailure(dir, FailureRecord{Reason: ReasonOther}); err == nil {
		t.Error("WriteFailure into a full folder = nil error")
	}
}

// Each failure of the hook leaves one record of its reason; success leaves none; a record
// that cannot be written does not hide the failure.
func TestExecRecordsItsFailure(t *testing.T) {
	proc := fakeProc(t, 7, cgroupV2)
	noPodProc := fakeProc(t, 7, "0::/system.slice/containerd.service/"+containerID+"\n")
	otherPodProc := fakeProc(t, 7, "0::/kubepods/besteffort/pod9f8e7d6c-0000-4000-8000-000000000000/"+containerID+"\n")
	cards := simulatedCards(t, "GPU-a")
	// pod is the test pod's arguments, then limit, the container's, also the pod's.
	pod := func(limit string) []string { return append(podArgs(limit), limit) }
	noSetter := func(string) (Setter, func(), error) { t.Error("NVML opened"); return nil, nil, nil }
	tests := []struct {
		name       string
		args       []string
		state      string
		open       func(string) (Setter, func(), error)
		wantReason string // "": no failure
		wantCard   string
		wantID     string
	}{
		{name: "success", args: append([]string{"--mode=simulated", "--simulated-card-dir=" + cards, "--proc-root=" + proc}, pod("GPU-a=1")...), open: noSetter},
		{name: "bad arguments", args: append([]string{"--mode=env"}, pod("GPU-a=1")...), open: noSetter, wantReason: ReasonArgs},
		{name: "no pod UID", args: []string{"--mode=simulated", "--simulated-card-dir=" + cards, "--proc-root=" + proc, "--pod-limit=GPU-a=1", "GPU-a=1"}, open: noSetter, wantReason: ReasonArgs},
		{name: "bad state", args: pod("GPU-a=1"), state: `{"id":"c"}`, open: noSetter, wantReason: ReasonState},
		{name: "no cgroup", args: append([]string{"--mode=simulated", "--simulated-card-dir=" + cards, "--proc-root=" + t.TempDir()}, pod("GPU-a=1")...), open: noSetter, wantReason: ReasonCgroup, wantID: containerID},
		{name: "no pod cgroup", args: append([]string{"--mode=simulated", "--simulated-card-dir=" + cards, "--proc-root=" + noPodProc}, pod("GPU-a=1")...), open: noSetter, wantReason: ReasonCgroup, wantID: containerID},
		{name: "another pod", args: append([]string{"--mode=simulated", "--simulated-card-dir=" + cards, "--proc-root=" + otherPodProc}, pod("GPU-a=1")...), open: noSetter, wantReason: ReasonPodMismatch, wantID: containerID},
		{name: "unknown simulated card", args: append([]string{"--mode=simulated", "--simulated-card-dir=" + cards, "--proc-root=" + proc}, pod("GPU-z=1")...), open: noSetter, wantReason: ReasonOther, wantCard: "GPU-z", wantID: containerID},
		{
			name: "NVML does not load", args: append([]string{"--proc-root=" + proc}, pod("GPU-a=1")...),
			open:       func(string) (Setter, func(), error) { return nil, nil, failed(ReasonNVML, "", os.ErrNotExist) },
			wantReason: ReasonNVML, wantID: containerID,
		},
		{
			name: "NVML hangs", args: append([]string{"--proc-root=" + proc, "--deadline=50ms"}, pod("GPU-b=1")...),
			open:       func(string) (Setter, func(), error) { return hangingSetter{block: make(chan struct{})}, func() {}, nil },
			wantReason: ReasonDeadline, wantCard: "GPU-b", wantID: containerID,
		},
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "failures")
			state := stateJSON(containerID, 7)
			if tc.state != "" {
				state = strings.NewReader(tc.state)
			}
			h := Hook{Open: tc.open, Now: func() time.Time { return at }}
			err := h.Exec(context.Background(), append([]string{"--failure-dir=" + dir}, tc.args...), state)
			if (err != nil) != (tc.wantReason != "") {
				t.Fatalf("Exec = %v, want a failure %q", err, tc.wantReason)
			}
			if tc.wantReason == "" {
				if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
					t.Errorf("a hook that succeeded made its failure folder (%v)", serr)
				}
				return
			}
			want := []FailureRecord{{Reason: tc.wantReason, Card: tc.wantCard, ContainerID: tc.wantID, Time: at, Message: err.Error()}}
			if d := cmp.Diff(want, readFailures(t, dir)); d != "" {
				t.Errorf("records (-want +got):\n%s", d)
			}
		})
	}
	t.Run("record not written", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		mustWrite(t, file, "")
		err := Hook{}.Exec(context.Background(), []string{"--failure-dir=" + file + "/x", "--mode=env", "GPU-a=1"}, stateJSON(containerID, 7))
		if err == nil || !strings.Contains(err.Error(), "--mode") || !strings.Contains(err.Error(), "failure record was not written") {
			t.Errorf("Exec = %v, want the argument error and the record's", err)
		}
		if r, _ := ReasonOf(err); r != ReasonArgs {
			t.Errorf("reason = %s, want %s", r, ReasonArgs)
		}
	})
}
