package limithook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Record is what the hook writes for a simulated card in place of the driver's limit: one
// file per card and cgroup, in RecordDir; a container's cgroup and its pod's each have theirs.
type Record struct {
	UUID string `json:"uuid"`
	// ContainerID is the runtime's container ID, from the container state: for a pod's
	// record, the container whose hook set it last.
	ContainerID string `json:"containerID"`
	// Cgroup and CgroupVersion are the container's cgroup (Cgroup), or its pod's when Pod.
	Cgroup        string `json:"cgroup"`
	CgroupVersion int    `json:"cgroupVersion"`
	// Pod is true for the record of the pod's cgroup (PodOf): the pod's limit, the sum of
	// its containers' grants on the card.
	Pod bool `json:"pod,omitempty"`
	// HardLimitBytes is the limit the driver would enforce, in bytes.
	HardLimitBytes uint64 `json:"hardLimitBytes"`
	// SoftLimitBytes is the soft limit the driver would set, in bytes, where it is below
	// HardLimitBytes (a container with a memory limit above its grant, or its pod); absent:
	// the soft limit is HardLimitBytes.
	SoftLimitBytes uint64 `json:"softLimitBytes,omitempty"`
}

// RecordDir is the folder of the records of the simulated card uuid, beside the card's file
// in cardDir (deviceplugin.SimulatedCardDir).
func RecordDir(cardDir, uuid string) string { return filepath.Join(cardDir, uuid+".limits") }

// recordFile names the record of cgroup path: the path with '/' as '_'.
func recordFile(path string) string {
	return strings.ReplaceAll(strings.Trim(path, "/"), "/", "_") + ".json"
}

// ReadRecords reads every record of the simulated card uuid. A card without any is no error.
func ReadRecords(cardDir, uuid string) ([]Record, error) {
	paths, err := filepath.Glob(filepath.Join(RecordDir(cardDir, uuid), "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("reading limit record: %w", err)
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("reading limit record %s: %w", p, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// SimulatedSetter records limits for simulated cards, whose files are in CardDir.
type SimulatedSetter struct{ CardDir string }

var _ Setter = SimulatedSetter{}

// AcceptsV1 is true: a simulated node may run cgroup v1 (the local cluster's machines do).
func (SimulatedSetter) AcceptsV1() bool { return true }

// Callee is the record's file, for the deadline's message.
func (SimulatedSetter) Callee() (who, call string) {
	return "the simulated card's folder", "writing the limit record"
}

// SetLimit writes l's Record for cg (a pod's cgroup when cg.Pod), replacing any earlier one
// atomically: every container of a pod writes the same pod record, the last one stays. Errors: no
// simulated card l.UUID in CardDir, or the record cannot be written.
func (s SimulatedSetter) SetLimit(_ context.Context, containerID string, cg Cgroup, l Limit) error {
	if _, err := os.Stat(filepath.Join(s.CardDir, l.UUID)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("card %s: no simulated card of that UUID in %s", l.UUID, s.CardDir)
		}
		return fmt.Errorf("card %s: %w", l.UUID, err)
	}
	dir := RecordDir(s.CardDir, l.UUID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("card %s: creating the limit records' folder: %w", l.UUID, err)
	}
	rec := Record{UUID: l.UUID, ContainerID: containerID, Cgroup: cg.Path, CgroupVersion: cg.Version, Pod: cg.Pod, HardLimitBytes: l.Bytes()}
	if l.Soft() < l.MiB {
		rec.SoftLimitBytes = l.SoftBytes()
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	name := recordFile(cg.Path)
	// A temporary file of its own: the hooks of a pod's containers all write the pod's record.
	tmp, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("card %s: writing the limit record: %w", l.UUID, err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("card %s: writing the limit record: %w", l.UUID, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("card %s: writing the limit record: %w", l.UUID, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("card %s: writing the limit record: %w", l.UUID, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("card %s: writing the limit record: %w", l.UUID, err)
	}
	return nil
}

// RemovePodRecords removes the records, on every simulated card in cardDir, of the
// containers of the pod with uid: those whose cgroup is under the pod's (underPodCgroup). Returns
// how many it removed. Errors: the records cannot be listed, read or removed (the others
// are still tried).
func RemovePodRecords(cardDir, uid string) (int, error) {
	paths, err := filepath.Glob(filepath.Join(cardDir, "*.limits", "*.json"))
	if err != nil {
		return 0, fmt.Errorf("listing the limit records: %w", err)
	}
	n := 0
	var errs []error
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading limit record: %w", err))
			continue
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			errs = append(errs, fmt.Errorf("reading limit record %s: %w", p, err))
			continue
		}
		if !underPodCgroup(r.Cgroup, uid) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing limit record: %w", err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// underPodCgroup tells whether cgroup path lies under the cgroup kubelet makes for the pod with
// uid: a component pod<UID> (cgroupfs driver) or <parent>-pod<UID with '-' as '_'>.slice
// (systemd driver).
func underPodCgroup(path, uid string) bool {
	if uid == "" {
		return false
	}
	systemd := "-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	for _, c := range strings.Split(path, "/") {
		if c == "pod"+uid || strings.HasSuffix(c, systemd) {
			return true
		}
	}
	return false
}
