package limithook

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeProc makes a /proc with process pid in cgroup content; returns its root.
func fakeProc(t *testing.T, pid int, content string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// stateJSON is the container state a runtime writes on a createRuntime hook's stdin.
func stateJSON(id string, pid int) *strings.Reader {
	return strings.NewReader(fmt.Sprintf(`{"ociVersion":"1.2.0","id":%q,"status":"creating","pid":%d,"bundle":"/run/b"}`, id, pid))
}

const (
	testPodUID  = "0b5c1f0e-8d1e-4f57-9a0c-6c1e2a3b4c5d"
	podCgroup   = "/kubepods/besteffort/pod" + testPodUID
	ctrCgroup   = podCgroup + "/" + containerID
	containerID = "4f2a1c3b5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708"
	cgroupV2    = "0::" + ctrCgroup + "\n"
	cgroupV1    = "9:name=systemd:/\n4:memory:" + ctrCgroup + "\n3:cpuset:/\n0::/\n"
)

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// podArgs are the hook's pod arguments for the test pod, with a pod limit for each of
// limits ("<UUID>=<MiB>"), to go before the container's limits.
func podArgs(limits ...string) []string {
	out := []string{"--pod-uid=" + testPodUID}
	for _, l := range limits {
		out = append(out, "--pod-limit="+l)
	}
	return out
}

// withPod is a for the test pod, with a pod limit as large as each container limit.
func withPod(a Args) Args {
	a.PodUID = testPodUID
	a.PodLimits = append([]Limit(nil), a.Limits...)
	return a
}
