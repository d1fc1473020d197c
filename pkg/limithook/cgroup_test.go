package limithook

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupOf(t *testing.T) {
	tests := []struct {
		name       string
		content    string
		v1Fallback bool
		want       Cgroup
		wantErr    bool
	}{
		{name: "cgroup v2", content: cgroupV2, want: Cgroup{Path: ctrCgroup, Version: 2}},
		{name: "cgroup v2, fallback unused", content: cgroupV2, v1Fallback: true, want: Cgroup{Path: ctrCgroup, Version: 2}},
		{
			name:    "systemd driver",
			content: "0::/kubepods.slice/kubepods-besteffort.slice/x.slice/cri-containerd-" + containerID + ".scope\n",
			want:    Cgroup{Path: "/kubepods.slice/kubepods-besteffort.slice/x.slice/cri-containerd-" + containerID + ".scope", Version: 2},
		},
		{name: "cgroup v1 host", content: cgroupV1, wantErr: true},
		{name: "cgroup v1 host, simulated", content: cgroupV1, v1Fallback: true, want: Cgroup{Path: ctrCgroup, Version: 1}},
		{name: "inside a cgroup namespace", content: "0::/\n", v1Fallback: true, wantErr: true},
		{name: "empty", content: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CgroupOf(fakeProc(t, 4242, tc.content), 4242, tc.v1Fallback)
			if (err != nil) != tc.wantErr {
				t.Fatalf("CgroupOf error = %v, want error %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("CgroupOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCgroupOfMissingProcess(t *testing.T) {
	if _, err := CgroupOf(t.TempDir(), 1, true); err == nil {
		t.Error("CgroupOf of a missing process: no error")
	}
}

func TestCgroupV2Mounted(t *testing.T) {
	v2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(v2, "cgroup.controllers"), []byte("cpu memory dmem\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CgroupV2Mounted(v2); err != nil {
		t.Errorf("CgroupV2Mounted(v2) = %v", err)
	}
	if err := CgroupV2Mounted(t.TempDir()); err == nil {
		t.Error("CgroupV2Mounted(a folder without cgroup.controllers) = nil")
	}
}
