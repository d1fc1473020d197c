// Package cgroups maps a process to the Kubernetes pod and container it runs in, from the
// content of /proc/<pid>/cgroup. It knows the paths kubelet gives pods under both cgroup
// drivers (cgroupfs: /kubepods/burstable/pod<uid>/<container id>; systemd:
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/
// cri-containerd-<id>.scope) on cgroup v1 and v2, below any prefix (kind, docker-in-docker,
// or "/../.." when the reader runs in a cgroup namespace of its own).
package cgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Container is where a process runs. The zero value means: not in a pod.
type Container struct {
	// PodUID is the pod's metadata.uid ("3f1c…-…", with dashes).
	PodUID string
	// ID is the container's runtime ID (64 hex digits), as the pod status's
	// containerStatuses[].containerID carries it after "<runtime>://"; empty when the process
	// sits in the pod's cgroup but in no container's (rare; the pod is still known).
	ID string
}

// InPod reports whether the process runs in a pod.
func (c Container) InPod() bool { return c.PodUID != "" }

// maxBytes bounds what is read of one cgroup file: a process is in one cgroup per hierarchy
// (about 15 lines on cgroup v1), each path at most PATH_MAX.
const maxBytes = 64 << 10

var (
	// uidDashed is a pod UID as the cgroupfs driver writes it; systemd writes '_' for '-'.
	uidDashed = `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`
	uidUnder  = `[0-9a-fA-F]{8}_[0-9a-fA-F]{4}_[0-9a-fA-F]{4}_[0-9a-fA-F]{4}_[0-9a-fA-F]{12}`
	// cgroupfs driver: "pod<uid>" below a "kubepods" segment.
	podCgroupfs = regexp.MustCompile(`^pod(` + uidDashed + `)$`)
	// systemd driver: "kubepods-pod<uid>.slice" (guaranteed), "kubepods-burstable-pod…",
	// "kubepods-besteffort-pod…", possibly prefixed ("kubelet-kubepods-…" in kind).
	podSystemd = regexp.MustCompile(`^(?:[A-Za-z0-9_.]+-)?kubepods(?:-burstable|-besteffort)?-pod(` + uidUnder + `)\.slice$`)
	// Container cgroups: the bare ID (cgroupfs driver) or "<runtime>-<id>.scope" (systemd
	// driver: containerd, CRI-O, Docker/cri-dockerd).
	ctrCgroupfs = regexp.MustCompile(`^([0-9a-f]{64})$`)
	ctrSystemd  = regexp.MustCompile(`^(?:cri-containerd|crio|docker)-([0-9a-f]{64})\.scope$`)
	// CRI-O's conmon monitors a container from a scope of its own beside it: not the container.
	conmon = regexp.MustCompile(`^crio-conmon-[0-9a-f]{64}\.scope$`)
)

// Parse reads the content of /proc/<pid>/cgroup: one "hierarchy-ID:controllers:path" line per
// hierarchy (cgroup v1), or the single "0::path" line of cgroup v2, or both (hybrid). The
// process is in a pod when a path holds a pod's cgroup; every line that names a pod must name
// the same pod and container. A conmon scope is not a container (zero Container). Errors:
// lines that are not of that form, lines that disagree, content over 64 KiB.
func Parse(content []byte) (Container, error) {
	if len(content) > maxBytes {
		return Container{}, fmt.Errorf("cgroup file of %d bytes, at most %d", len(content), maxBytes)
	}
	var found Container
	var from string
	sc := bufio.NewScanner(strings.NewReader(string(content)))
	sc.Buffer(make([]byte, 0, 4096), maxBytes)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		_, path, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			return Container{}, fmt.Errorf("line %d %q: want hierarchy-ID:controllers:path", n, line)
		}
		if v, err := strconv.Atoi(id); err != nil || v < 0 {
			return Container{}, fmt.Errorf("line %d %q: hierarchy ID is not a number", n, line)
		}
		if !strings.HasPrefix(path, "/") {
			return Container{}, fmt.Errorf("line %d %q: path is not absolute", n, line)
		}
		c, isConmon := parsePath(path)
		if isConmon {
			return Container{}, nil
		}
		if !c.InPod() {
			continue
		}
		if found.InPod() && c != found {
			return Container{}, fmt.Errorf("line %d names pod %s container %q, an earlier line %q pod %s container %q",
				n, c.PodUID, c.ID, from, found.PodUID, found.ID)
		}
		found, from = c, line
	}
	if err := sc.Err(); err != nil {
		return Container{}, err
	}
	return found, nil
}

// parsePath finds the pod and container in one cgroup path: the pod's segment below a
// kubepods segment (or a ".."), the container's the segment right after it. Deeper segments (a
// container's own sub-cgroups) are ignored.
func parsePath(path string) (c Container, isConmon bool) {
	segs := strings.Split(path, "/")
	underKubepods := false
	for i, s := range segs {
		var uid string
		if m := podSystemd.FindStringSubmatch(s); m != nil {
			uid = strings.ReplaceAll(m[1], "_", "-")
		} else if m := podCgroupfs.FindStringSubmatch(s); m != nil && underKubepods {
			uid = m[1]
		}
		// ".." leads out of the reader's cgroup namespace (the default for containers on
		// cgroup v2): the segments above, kubepods among them, are not shown, so a pod<uid>
		// segment after it counts (/../../burstable/pod<uid>/<id>).
		if s == ".." || strings.HasSuffix(s, "kubepods") || strings.HasSuffix(s, "kubepods.slice") {
			underKubepods = true
		}
		if uid == "" {
			continue
		}
		c.PodUID = strings.ToLower(uid)
		if i+1 < len(segs) {
			next := segs[i+1]
			if conmon.MatchString(next) {
				return Container{}, true
			}
			if m := ctrCgroupfs.FindStringSubmatch(next); m != nil {
				c.ID = m[1]
			} else if m := ctrSystemd.FindStringSubmatch(next); m != nil {
				c.ID = m[1]
			}
		}
		return c, false
	}
	return Container{}, false
}

// StatusID returns the runtime ID of a pod status's containerID ("containerd://<id>",
// "cri-o://<id>", "docker://<id>"): what Container.ID is compared with. "" when s has no
// "<runtime>://" prefix or nothing after it.
func StatusID(s string) string {
	_, id, ok := strings.Cut(s, "://")
	if !ok {
		return ""
	}
	return id
}

// Reader reads /proc/<pid>/cgroup below a proc root: "/proc" normally; share-plugin runs
// with the host's PID namespace (hostPID) so that the PIDs NVML reports are its own, and
// may be given the host's /proc mounted elsewhere.
type Reader struct {
	ProcRoot string
}

// ErrNoProcess is returned (wrapped) when the PID has no entry under the proc root: the
// process ended, or the reader does not share the host's PID namespace.
var ErrNoProcess = errors.New("no such process under the proc root")

// Lookup returns the pod and container of process pid (see Parse).
func (r Reader) Lookup(pid uint32) (Container, error) {
	root := r.ProcRoot
	if root == "" {
		root = "/proc"
	}
	path := filepath.Join(root, strconv.FormatUint(uint64(pid), 10), "cgroup")
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Container{}, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	if err != nil {
		return Container{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return Container{}, fmt.Errorf("reading %s: %w", path, err)
	}
	c, err := Parse(b)
	if err != nil {
		return Container{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
