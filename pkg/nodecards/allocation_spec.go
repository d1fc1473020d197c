package nodecards

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// The per-allocation CDI specs of the device plugin's cdi-allocation strategy.
const (
	// allocationCDIVendor and allocationCDIClass make the kind of the per-allocation devices:
	// one device per served container, named by allocationDeviceName.
	allocationCDIVendor = "gpushare.io"
	allocationCDIClass  = "allocation"
)

// AllocationCDIKind is the CDI kind of the per-allocation devices, gpushare.io/allocation.
const AllocationCDIKind = allocationCDIVendor + "/" + allocationCDIClass

// allocationSpecPrefix starts every per-allocation spec file name (CDI's transient spec
// naming, GenerateTransientSpecName): <prefix><pod UID>_<container>.json.
var allocationSpecPrefix = cdiapi.GenerateTransientSpecName(allocationCDIVendor, allocationCDIClass, "")

// allocationDeviceName is the CDI device name of one container's allocation:
// <pod UID>_<container name>. Errors: a UID that is not letters, digits and '-' (an API
// server's UIDs are UUIDs), or a name the CDI naming rules refuse; either would make the
// spec's file name ambiguous or the runtime reject the device.
func allocationDeviceName(uid types.UID, container string) (string, error) {
	if uid == "" || strings.IndexFunc(string(uid), func(r rune) bool { return r != '-' && !parser.IsAlphaNumeric(r) }) >= 0 {
		return "", fmt.Errorf("pod UID %q: want letters, digits and '-'", uid)
	}
	name := string(uid) + "_" + container
	if err := parser.ValidateDeviceName(name); err != nil {
		return "", fmt.Errorf("CDI device name for container %q: %w", container, err)
	}
	return name, nil
}

// AllocationSpecPath is where the per-allocation spec of device name (<pod UID>_<container>)
// lives in dir.
func AllocationSpecPath(dir, name string) string {
	return filepath.Join(dir, allocationSpecPrefix+name+".json")
}

// WriteAllocationSpec writes into s.Dir the spec of container cont of the pod with uid, with
// the edits of cards (those the runtime's CDI registry has no device for), env and hooks,
// and returns the qualified device name to hand kubelet (gpushare.io/allocation=<name>), the
// file validated and renamed into place by writeSpecFile. Errors: a UID or container name
// the CDI naming rules refuse, a real card without a minor number, or a file that cannot be
// written.
func (s CardSpecs) WriteAllocationSpec(uid types.UID, cont string, cards []gpushare.Device, env map[string]string, hooks []*cdi.Hook) (string, error) {
	name, err := allocationDeviceName(uid, cont)
	if err != nil {
		return "", err
	}
	if err := s.writeDevice(AllocationSpecPath(s.Dir, name), AllocationCDIKind, name, cards, env, hooks); err != nil {
		return "", err
	}
	return parser.QualifiedName(allocationCDIVendor, allocationCDIClass, name), nil
}

// allocationSpecs lists the per-allocation spec files in dir by the UID of their pod.
func allocationSpecs(dir string) (map[types.UID][]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, allocationSpecPrefix+"*.json"))
	if err != nil {
		return nil, err
	}
	out := map[types.UID][]string{}
	for _, path := range paths {
		rest := strings.TrimPrefix(filepath.Base(path), allocationSpecPrefix)
		uid, _, ok := strings.Cut(rest, "_")
		if !ok {
			continue // not one of ours
		}
		out[types.UID(uid)] = append(out[types.UID(uid)], path)
	}
	return out, nil
}

// RemoveAllocationSpecs removes from dir the per-allocation spec files of every pod for
// whose UID gone is true: one pod's whose grant was released, or, in the start-up sweep,
// those of pods that went while no plugin ran. Returns the UIDs of the pods it found files
// of, in no order, and how many files it removed; a file that cannot be removed is logged
// (one already gone is no failure) and left for the next sweep. Errors: dir cannot be
// listed.
func RemoveAllocationSpecs(dir string, gone func(uid types.UID) bool) (pods []types.UID, files int, err error) {
	specs, err := allocationSpecs(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("listing the per-allocation CDI specs in %s: %w", dir, err)
	}
	for uid, paths := range specs {
		if !gone(uid) {
			continue
		}
		files += removeSpecFiles(paths)
		pods = append(pods, uid)
	}
	return pods, files, nil
}

// removeSpecFiles removes the spec files paths, logging failures (one already gone is no
// failure), and returns how many it removed.
func removeSpecFiles(paths []string) int {
	n := 0
	for _, path := range paths {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			klog.ErrorS(err, "Removing a per-allocation CDI spec failed", "path", path)
			continue
		}
		n++
	}
	return n
}
