package cgroups

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	uid   = "0d8e2f4a-6b1c-4e3d-9a7f-12ab34cd56ef"
	uidU  = "0d8e2f4a_6b1c_4e3d_9a7f_12ab34cd56ef"
	ctrID = "4f1e0c9a2b3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7"
	other = "9999999999999999999999999999999999999999999999999999999999999999"
)

var want = Container{PodUID: uid, ID: ctrID}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Container
		wantErr string
	}{
		// cgroup v1, cgroupfs driver: one line per hierarchy, all with the same path
		// (some hierarchies, e.g. rdma, left at the root).
		{name: "v1 cgroupfs burstable", in: "12:pids:/kubepods/burstable/pod" + uid + "/" + ctrID + "\n" +
			"11:rdma:/\n" +
			"10:memory:/kubepods/burstable/pod" + uid + "/" + ctrID + "\n" +
			"4:cpu,cpuacct:/kubepods/burstable/pod" + uid + "/" + ctrID + "\n" +
			"1:name=systemd:/kubepods/burstable/pod" + uid + "/" + ctrID + "\n", want: want},
		{name: "v1 cgroupfs guaranteed", in: "7:memory:/kubepods/pod" + uid + "/" + ctrID + "\n", want: want},
		{name: "v1 cgroupfs besteffort", in: "7:memory:/kubepods/besteffort/pod" + uid + "/" + ctrID + "\n", want: want},
		// cgroup v2, cgroupfs driver.
		{name: "v2 cgroupfs", in: "0::/kubepods/burstable/pod" + uid + "/" + ctrID + "\n", want: want},
		// cgroup v2, systemd driver, per runtime.
		{name: "v2 systemd containerd", in: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope\n", want: want},
		{name: "v2 systemd cri-o", in: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidU + ".slice/crio-" + ctrID + ".scope\n", want: want},
		{name: "v2 systemd docker", in: "0::/kubepods.slice/kubepods-pod" + uidU + ".slice/docker-" + ctrID + ".scope\n", want: want},
		// v1 systemd driver: every hierarchy.
		{name: "v1 systemd", in: "9:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope\n" +
			"1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope\n", want: want},
		// Hybrid: v1 hierarchies and the v2 unified line.
		{name: "hybrid", in: "5:devices:/kubepods/pod" + uid + "/" + ctrID + "\n0::/kubepods/pod" + uid + "/" + ctrID + "\n", want: want},
		// A container's own sub-cgroup (systemd inside a container, nested runtimes).
		{name: "deeper segments ignored", in: "0::/kubepods.slice/kubepods-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope/init.scope\n", want: want},
		// kind: the node is a container, kubelet's cgroups are below its own.
		{name: "kind cgroupfs", in: "0::/kubelet/kubepods/burstable/pod" + uid + "/" + ctrID + "\n", want: want},
		{name: "kind systemd", in: "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope\n", want: want},
		{name: "docker-in-docker prefix", in: "4:memory:/docker/" + other + "/kubepods/burstable/pod" + uid + "/" + ctrID + "\n", want: want},
		// share-plugin in a cgroup namespace of its own (the default on cgroup v2) sees
		// other cgroups relative to its root.
		{name: "cgroup namespace relative path", in: "0::/../../kubepods-besteffort-pod" + uidU + ".slice/cri-containerd-" + ctrID + ".scope\n", want: want},
		{name: "cgroup namespace, cgroupfs driver", in: "0::/../../burstable/pod" + uid + "/" + ctrID + "\n", want: want},
		{name: "cgroup namespace, host process", in: "0::/../../../system.slice/containerd.service\n"},
		{name: "upper-case UID hex is normalised", in: "0::/kubepods/pod" + strings.ToUpper(uid) + "/" + ctrID + "\n", want: want},
		// In a pod, not in a container (sandbox-level process): the pod is known.
		{name: "pod without container segment", in: "0::/kubepods/burstable/pod" + uid + "\n", want: Container{PodUID: uid}},
		{name: "pod with unknown container segment", in: "0::/kubepods.slice/kubepods-pod" + uidU + ".slice/something.scope\n", want: Container{PodUID: uid}},
		// CRI-O's conmon, beside the container: not the container.
		{name: "cri-o conmon", in: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/crio-conmon-" + ctrID + ".scope\n"},
		// Not pods.
		{name: "host process v2", in: "0::/system.slice/containerd.service\n"},
		{name: "host user session", in: "0::/user.slice/user-1000.slice/session-3.scope\n"},
		{name: "root", in: "0::/\n"},
		{name: "v1 host process", in: "12:pids:/system.slice/sshd.service\n1:name=systemd:/system.slice/sshd.service\n"},
		{name: "docker container not a pod", in: "0::/system.slice/docker-" + ctrID + ".scope\n"},
		{name: "pod-like segment outside kubepods", in: "0::/machine/pod" + uid + "/" + ctrID + "\n"},
		{name: "empty", in: ""},
		// Malformed.
		{name: "no colons", in: "garbage\n", wantErr: "want hierarchy-ID"},
		{name: "one colon", in: "0:/kubepods\n", wantErr: "want hierarchy-ID"},
		{name: "hierarchy not a number", in: "x::/kubepods\n", wantErr: "not a number"},
		{name: "relative path", in: "0::kubepods/pod" + uid + "\n", wantErr: "not absolute"},
		{name: "lines disagree", in: "4:memory:/kubepods/pod" + uid + "/" + ctrID + "\n0::/kubepods/pod" + uid + "/" + other + "\n", wantErr: "earlier line"},
		{name: "too large", in: strings.Repeat("0::/\n", maxBytes/5+1), wantErr: "at most"},
		{name: "binary", in: "\x00\x01\x02", wantErr: "want hierarchy-ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestStatusID(t *testing.T) {
	for in, want := range map[string]string{
		"containerd://" + ctrID: ctrID,
		"cri-o://" + ctrID:      ctrID,
		"docker://" + ctrID:     ctrID,
		ctrID:                   "",
		"":                      "",
		"containerd://":         "",
	} {
		if got := StatusID(in); got != want {
			t.Errorf("StatusID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReaderLookup(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "42"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "42", "cgroup"), []byte("0::/kubepods/pod"+uid+"/"+ctrID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := Reader{ProcRoot: root}
	got, err := r.Lookup(42)
	if err != nil || got != want {
		t.Errorf("Lookup(42) = %+v, %v; want %+v", got, err, want)
	}
	if _, err := r.Lookup(43); !errors.Is(err, ErrNoProcess) {
		t.Errorf("Lookup(43) error = %v, want ErrNoProcess", err)
	}
	// This process, through the real /proc: whatever it is in, Lookup must not fail.
	if _, err := (Reader{}).Lookup(uint32(os.Getpid())); err != nil {
		t.Errorf("Lookup(own PID) through /proc: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("0::/kubepods/pod" + uid + "/" + ctrID + "\n")
	f.Add("1:name=systemd:/kubepods.slice/kubepods-pod" + uidU + ".slice/crio-" + ctrID + ".scope\n")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := Parse([]byte(s))
		if err == nil && c.ID != "" && c.PodUID == "" {
			t.Errorf("container %q without a pod", c.ID)
		}
	})
}
