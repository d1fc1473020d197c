package limithook

import (
	"fmt"
	"path"
	"strings"
)

// PodCgroup is the cgroup kubelet makes for a pod: the parent of each of its containers'
// cgroups, whatever kubelet's cgroup driver.
type PodCgroup struct {
	// Cgroup is the pod's cgroup, Pod set, in the hierarchy of the container's.
	Cgroup Cgroup
	// UID is the pod's UID, as kubelet named the cgroup after it.
	UID string
}

// PodOf is the pod cgroup of container cgroup cg: its parent, which must be a kubelet pod
// cgroup, whose name gives the pod's UID:
//
//	cgroupfs: …/kubepods[/burstable|/besteffort]/pod<uid>/<container id>
//	systemd:  …/kubepods[-<qos>]-pod<uid, '-' as '_'>.slice/cri-containerd-<id>.scope (crio-<id>.scope)
//
// Only the last two segments are read: what lies above them (the QoS class, a kubelet
// --cgroup-root, a node's own cgroup) does not matter. Errors: cg is not directly under a pod
// cgroup (a kubelet without pod cgroups, a runtime that nests the process deeper): the hook
// then cannot limit the pod and refuses the container.
func PodOf(cg Cgroup) (PodCgroup, error) {
	p := path.Clean("/" + cg.Path)
	parent, leaf := path.Split(p)
	parent = path.Clean(parent)
	uid, ok := podUIDOf(path.Base(parent))
	if !ok || leaf == "" || parent == "/" {
		return PodCgroup{}, fmt.Errorf("cgroup %s does not look like the cgroup of a Kubernetes pod's container: its parent is no kubelet pod cgroup (pod<uid> under the cgroupfs driver, …-pod<uid>.slice under systemd), so the pod's limit has nowhere to go", cg.Path)
	}
	return PodCgroup{Cgroup: Cgroup{Path: parent, Version: cg.Version, Pod: true}, UID: uid}, nil
}

// podUIDOf is the pod UID a kubelet pod cgroup's name carries: "pod<uid>" (cgroupfs) or
// "<prefix>-pod<uid with '-' as '_'>.slice" (systemd); ok is false for any other name.
func podUIDOf(name string) (uid string, ok bool) {
	if slice, isSlice := strings.CutSuffix(name, ".slice"); isSlice {
		i := strings.LastIndex(slice, "-pod")
		if i < 0 {
			return "", false
		}
		escaped := slice[i+len("-pod"):]
		if strings.Contains(escaped, "-") {
			return "", false
		}
		uid = strings.ReplaceAll(escaped, "_", "-")
	} else if uid, ok = strings.CutPrefix(name, "pod"); !ok {
		return "", false
	}
	return uid, validPodUID(uid)
}
