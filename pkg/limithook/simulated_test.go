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

// Each card gets two records: the pod's cgroup's, its limit the pod's, and the container's.
func TestRunSimulatedRecordsEachCard(t *testing.T) {
	for _, tc := range []struct {
		name, cgroup string
		version      int
	}{{"cgroup v2", cgroupV2, 2}, {"cgroup v1 host", cgroupV1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			cards := simulatedCards(t, "GPU-a", "GPU-b")
			a := Args{Mode: ModeSimulated, SimulatedCardDir: cards, ProcRoot: fakeProc(t, 77, tc.cgroup),
				Limits: []Limit{{UUID: "GPU-a", MiB: 3072}, {UUID: "GPU-b", MiB: 1024}},
				PodUID: testPodUID, PodLimits: []Limit{{UUID: "GPU-a", MiB: 5120}, {UUID: "GPU-b", MiB: 2048}}}
			if err := Run(context.Background(), a, stateJSON(containerID, 77), SimulatedSetter{CardDir: cards}); err != nil {
				t.Fatalf("Run = %v", err)
			}
			for i, l := range a.Limits {
				got, err := ReadRecords(cards, l.UUID)
				if err != nil {
					t.Fatal(err)
				}
				want := []Record{
					{UUID: l.UUID, ContainerID: containerID, Cgroup: podCgroup, CgroupVersion: tc.version, Pod: true, HardLimitBytes: uint64(a.PodLimits[i].MiB) << 20},
					{UUID: l.UUID, ContainerID: containerID, Cgroup: ctrCgroup, CgroupVersion: tc.version, HardLimitBytes: uint64(l.MiB) << 20},
				}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("records of %s (-want +got):\n%s", l.UUID, d)
				}
			}
		})
	}
}

// A limit above the grant records its soft limit beside the hard one; a record without it
// (the grant is the limit) is written as before, without the field.
func TestRunSimulatedRecordsSoftLimit(t *testing.T) {
	cards := simulatedCards(t, "GPU-a")
	a := Args{Mode: ModeSimulated, SimulatedCardDir: cards, ProcRoot: fakeProc(t, 78, cgroupV2),
		Limits: []Limit{{UUID: "GPU-a", MiB: 3072, SoftMiB: 1024}},
		PodUID: testPodUID, PodLimits: []Limit{{UUID: "GPU-a", MiB: 4096, SoftMiB: 2048}}}
	if err := Run(context.Background(), a, stateJSON(containerID, 78), SimulatedSetter{CardDir: cards}); err != nil {
		t.Fatalf("Run = %v", err)
	}
	got, err := ReadRecords(cards, "GPU-a")
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{UUID: "GPU-a", ContainerID: containerID, Cgroup: podCgroup, CgroupVersion: 2, Pod: true, HardLimitBytes: 4096 << 20, SoftLimitBytes: 2048 << 20},
		{UUID: "GPU-a", ContainerID: containerID, Cgroup: ctrCgroup, CgroupVersion: 2, HardLimitBytes: 3072 << 20, SoftLimitBytes: 1024 << 20},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("records (-want +got):\n%s", d)
	}
	b, err := os.ReadFile(filepath.Join(RecordDir(cards, "GPU-a"), recordFile(ctrCgroup)))
	if err != nil || !strings.Contains(string(b), `"softLimitBytes":1073741824`) {
		t.Errorf("record file %s (%v): want softLimitBytes", b, err)
	}
}

func TestRunSimulatedUnknownCard(t *testing.T) {
	cards := simulatedCards(t, "GPU-a")
	a := withPod(Args{Mode: ModeSimulated, SimulatedCardDir: cards, ProcRoot: fakeProc(t, 77, cgroupV2), Limits: []Limit{{UUID: "GPU-z", MiB: 1}}})
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

// TestRemovePodRecords: the records of a pod's containers go, on every card and under either
// cgroup driver's naming; another pod's stay, including one whose UID only starts alike.
func TestRemovePodRecords(t *testing.T) {
	const uid = "1b2c-3d4e"
	tests := []struct {
		name   string
		cgroup string
		gone   bool
	}{
		{"cgroupfs", "/kubepods/burstable/pod" + uid + "/abc", true},
		{"systemd", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1b2c_3d4e.slice/cri-containerd-abc.scope", true},
		{"guaranteed, systemd", "/kubepods.slice/kubepods-pod1b2c_3d4e.slice/cri-containerd-abc.scope", true},
		{"another pod", "/kubepods/burstable/pod9f8e-7d6c/abc", false},
		{"a longer UID", "/kubepods/burstable/pod" + uid + "-5f6a/abc", false},
		{"a longer UID, systemd", "/kubepods.slice/kubepods-pod1b2c_3d4e_5f6a.slice/cri-containerd-abc.scope", false},
	}
	cards := simulatedCards(t, "GPU-a", "GPU-b")
	for _, tc := range tests {
		for _, u := range []string{"GPU-a", "GPU-b"} {
			if err := (SimulatedSetter{CardDir: cards}).SetLimit(context.Background(), "c", Cgroup{Path: tc.cgroup, Version: 2}, Limit{UUID: u, MiB: 1024}); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := RemovePodRecords(cards, uid)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, tc := range tests {
		if tc.gone {
			want += 2
		}
	}
	if n != want {
		t.Errorf("removed %d records, want %d", n, want)
	}
	for _, u := range []string{"GPU-a", "GPU-b"} {
		recs, err := ReadRecords(cards, u)
		if err != nil {
			t.Fatal(err)
		}
		left := map[string]bool{}
		for _, r := range recs {
			left[r.Cgroup] = true
		}
		for _, tc := range tests {
			if left[tc.cgroup] == tc.gone {
				t.Errorf("%s, card %s: record kept %v, want %v", tc.name, u, left[tc.cgroup], !tc.gone)
			}
		}
	}
}
