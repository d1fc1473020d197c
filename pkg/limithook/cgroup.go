package limithook

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Cgroup is the cgroup a container's process runs in.
type Cgroup struct {
	// Path is relative to the hierarchy's root, as /proc/<pid>/cgroup gives it
	// ("/kubepods/besteffort/pod<uid>/<container id>").
	Path string
	// Version is 2 (the unified hierarchy) or, for simulated cards on a cgroup v1 host
	// only, 1 (the memory controller's hierarchy).
	Version int
	// Pod is true for a pod's cgroup (PodOf), the parent of its containers'.
	Pod bool
}

// maxCgroupBytes bounds what is read of /proc/<pid>/cgroup.
const maxCgroupBytes = 64 << 10

// CgroupOf reads the cgroup of process pid from <procRoot>/<pid>/cgroup: the path of the
// unified line "0::<path>". A path of "/" means no cgroup v2 hierarchy holds the container
// (a cgroup v1 host, or a reader inside the container's cgroup namespace); with v1Fallback
// (simulated cards) the memory controller's path is taken instead. Errors: the file cannot
// be read, or no usable line.
func CgroupOf(procRoot string, pid int, v1Fallback bool) (Cgroup, error) {
	file := filepath.Join(procRoot, strconv.Itoa(pid), "cgroup")
	f, err := os.Open(file)
	if err != nil {
		return Cgroup{}, fmt.Errorf("reading the container's cgroup: %w", err)
	}
	defer f.Close()
	b := make([]byte, maxCgroupBytes)
	n, err := f.Read(b)
	if err != nil {
		return Cgroup{}, fmt.Errorf("reading %s: %w", file, err)
	}
	return parseCgroup(b[:n], v1Fallback, file)
}

func parseCgroup(content []byte, v1Fallback bool, file string) (Cgroup, error) {
	var unified, memory string
	sc := bufio.NewScanner(bytes.NewReader(content))
	for sc.Scan() {
		id, rest, ok1 := strings.Cut(sc.Text(), ":")
		ctrls, path, ok2 := strings.Cut(rest, ":")
		if !ok1 || !ok2 {
			continue
		}
		switch {
		case id == "0" && ctrls == "":
			unified = path
		case v1Fallback && isController(ctrls, "memory"):
			memory = path
		}
	}
	switch {
	case unified != "" && unified != "/":
		return Cgroup{Path: unified, Version: 2}, nil
	case v1Fallback && memory != "" && memory != "/":
		return Cgroup{Path: memory, Version: 1}, nil
	}
	return Cgroup{}, fmt.Errorf("%s names no cgroup v2 path for the container (unified line %q): per-cgroup GPU memory limits need the cgroup v2 hierarchy (systemd.unified_cgroup_hierarchy=1) and a runtime that places containers in it", file, unified)
}

func isController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// CgroupV2Mounted reports whether root is the root of a cgroup v2 (unified) hierarchy, as
// the driver's per-cgroup limits need: nil, or an error saying what is there instead.
func CgroupV2Mounted(root string) error {
	_, err := os.Stat(filepath.Join(root, "cgroup.controllers"))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s is not a cgroup v2 hierarchy (no cgroup.controllers): the node runs cgroup v1 or hybrid", root)
	}
	return fmt.Errorf("checking for cgroup v2 at %s: %w", root, err)
}
