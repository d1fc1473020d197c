package limithook

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func simulatedCards(t *testing.T, uuids ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, u := range uuids {
		if err := os.WriteFile(filepath.Join(dir, u), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRunSimulatedRecordsEachCard(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup string
		version      int
	}{{"cgroup v2", cgroupV2, 2}, {"cgroup v1 host", cgroupV1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			cards := simulatedCards(t, "GPU-a", "GPU-b")
			a := Args{Mode: ModeSimulated, SimulatedCardDir: cards, ProcRoot: fakeProc(t, 77, tc.cgroup),
				Limits: []Limit{{UUID: "GPU-a", MiB: 3072}, {UUID: "GPU-b", MiB: 1024}}}
			if err := Run(context.Background(), a, stateJSON(containerID, 77), SimulatedSetter{CardDir: cards}); err != nil {
				t.Fatalf("Run = %v", err)
			}
			for _, l := range a.Limits {
				got, err := ReadRecords(cards, l.UUID)
				if err != nil {
					t.Fatal(err)
				}
				want := []Record{{UUID: l.UUID, ContainerID: containerID, Cgroup: podCgroup, CgroupVersion: tc.version, HardLimitBytes: uint64(l.MiB) << 20}}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("records of %s (-want +got):\n%s", l.UUID, d)
				}
			}
		})
	}
}

func TestRunSimulatedUnknownCard(t *testing.T) {
	cards := simulatedCards(t, "GPU-a")
	a := Args{Mode: ModeSimulated, SimulatedCardDir: cards, ProcRoot: fakeProc(t, 77, cgroupV2), Limits: []Limit{{UUID: "GPU-z", MiB: 1}}}
	err := Run(context.Background(), a, stateJSON(containerID, 77), SimulatedSetter{CardDir: cards})
	if err == nil || !strings.Contains(err.Error(), "GPU-z") {
		t.Errorf("Run on an unknown card = %v, want an error naming it", err)
	}
}

func TestReadState(t *testing.T) {
	for _, in := range []string{`{"id":"c","pid":0}`, `not json`, ``} {
		if _, err := ReadState(strings.NewReader(in)); err == nil {
			t.Errorf("ReadState(%q) = nil error", in)
		}
	}
	s, err := ReadState(stateJSON("c", 9))
	if err != nil || s.Pid != 9 || s.ID != "c" {
		t.Errorf("ReadState = %+v, %v", s, err)
	}
}
