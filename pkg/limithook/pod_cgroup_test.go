package limithook

import "testing"

// PodOf reads the pod's cgroup and UID from a container's cgroup under either kubelet cgroup
// driver, and refuses anything else.
func TestPodOf(t *testing.T) {
	const (
		uid     = "0b5c1f0e-8d1e-4f57-9a0c-6c1e2a3b4c5d"
		escaped = "0b5c1f0e_8d1e_4f57_9a0c_6c1e2a3b4c5d"
	)
	tests := []struct {
		container string
		pod       string // "": refused
		uid       string
	}{
		{container: "/kubepods/burstable/pod" + uid + "/" + containerID, pod: "/kubepods/burstable/pod" + uid, uid: uid},
		{container: "/kubepods/besteffort/pod" + uid + "/" + containerID, pod: "/kubepods/besteffort/pod" + uid, uid: uid},
		{container: "/kubepods/pod" + uid + "/" + containerID, pod: "/kubepods/pod" + uid, uid: uid},
		{container: "/kubepods/pod6f1e2d3c4b5a69788796a5b4c3d2e1f0/" + containerID, pod: "/kubepods/pod6f1e2d3c4b5a69788796a5b4c3d2e1f0", uid: "6f1e2d3c4b5a69788796a5b4c3d2e1f0"},
		{
			container: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + escaped + ".slice/cri-containerd-" + containerID + ".scope",
			pod:       "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + escaped + ".slice", uid: uid,
		},
		{
			container: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + escaped + ".slice/crio-" + containerID + ".scope",
			pod:       "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + escaped + ".slice", uid: uid,
		},
		{container: "/kubepods.slice/kubepods-pod" + escaped + ".slice/cri-containerd-" + containerID + ".scope", pod: "/kubepods.slice/kubepods-pod" + escaped + ".slice", uid: uid},
		{container: "/kubepods/" + containerID},
		{container: "/kubepods/burstable/pod" + uid},
		{container: "/kubepods.slice/kubepods-pod" + escaped + ".slice"},
		{container: "/kubepods.slice/kubepods-pod" + escaped + ".slice/crio-" + containerID + ".scope/container"},
		{container: "/kubepods/burstable/pod" + escaped + "/" + containerID},                        // '_' is systemd's escaping only
		{container: "/kubepods.slice/kubepods-pod" + uid + ".slice/crio-" + containerID + ".scope"}, // '-' unescaped under systemd
		{container: "/kubepods/burstable/pod/" + containerID},
		{container: "/system.slice/containerd.service"},
		{container: "/"},
		{container: ""},
	}
	for _, tc := range tests {
		t.Run(tc.container, func(t *testing.T) {
			got, err := PodOf(Cgroup{Path: tc.container, Version: 2})
			if tc.pod == "" {
				if err == nil {
					t.Fatalf("PodOf = %+v, want a refusal", got)
				}
				return
			}
			want := PodCgroup{Cgroup: Cgroup{Path: tc.pod, Version: 2, Pod: true}, UID: tc.uid}
			if err != nil || got != want {
				t.Errorf("PodOf = %+v, %v; want %+v", got, err, want)
			}
		})
	}
}
