package deviceplugin

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/limithook"
)

// The per-allocation CDI specs of the cdi-allocation strategy.
const (
	// AllocationCDIVendor and AllocationCDIClass make the kind of the per-allocation devices,
	// gpushare.io/allocation: one device per served container, named by allocationDeviceName.
	AllocationCDIVendor = "gpushare.io"
	AllocationCDIClass  = "allocation"
	// envCUDAVisibleDevices is set to the container's card UUIDs, so that a value the pod
	// sets itself does not decide which of its cards CUDA sees, or in which order.
	envCUDAVisibleDevices = "CUDA_VISIBLE_DEVICES"
)

// AllocationCDIKind is the CDI kind of the per-allocation devices.
const AllocationCDIKind = AllocationCDIVendor + "/" + AllocationCDIClass

// nvidiaControlNodes are the device nodes besides /dev/nvidia<minor> that a CUDA process
// opens, as NVIDIA's CDI spec lists them (nvidia-ctk cdi generate); each goes into a spec
// only when it exists, since the runtime fails a container whose spec names a missing node.
var nvidiaControlNodes = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}

// allocationSpecPrefix starts every per-allocation spec file name (CDI's transient spec
// naming, GenerateTransientSpecName): <prefix><pod UID>_<container>.json.
var allocationSpecPrefix = cdiapi.GenerateTransientSpecName(AllocationCDIVendor, AllocationCDIClass, "")

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

// allocationSpecPath is where the spec of device name lives in dir.
func allocationSpecPath(dir, name string) string {
	return filepath.Join(dir, allocationSpecPrefix+name+".json")
}

// cardEdits is how a container is given its cards: per card its device node
// /dev/nvidia<minor> and the control nodes that exist (controlNodes), or, for simulated
// cards (simulatedCardDir set), the card's file mounted read-only as WriteSimulatedCDISpec's
// spec does. No cards (the runtime's own CDI devices bring them all): no edits. Errors: a
// real card whose minor number NVML did not tell.
func cardEdits(cards []gpushare.Device, minors map[string]int, simulatedCardDir string, controlNodes []string) (cdi.ContainerEdits, error) {
	var e cdi.ContainerEdits
	if len(cards) == 0 {
		return e, nil
	}
	for _, c := range cards {
		if simulatedCardDir != "" {
			e.Mounts = append(e.Mounts, simulatedCardMount(simulatedCardDir, c.UUID))
			continue
		}
		minor, ok := minors[c.UUID]
		if !ok || minor < 0 {
			return cdi.ContainerEdits{}, fmt.Errorf("card %d (%s): NVML did not tell its device-node minor number", c.Index, c.UUID)
		}
		e.DeviceNodes = append(e.DeviceNodes, &cdi.DeviceNode{Path: "/dev/nvidia" + strconv.Itoa(minor)})
	}
	if simulatedCardDir == "" {
		for _, n := range controlNodes {
			e.DeviceNodes = append(e.DeviceNodes, &cdi.DeviceNode{Path: n})
		}
	}
	return e, nil
}

// allocationSpec is the CDI spec of one container's allocation: one device, name, whose
// edits give the cards (cardEdits), set env, sorted by key so that equal allocations write
// equal files, and add hooks (the limit hook on a limit node).
func allocationSpec(name string, edits cdi.ContainerEdits, env map[string]string, hooks []*cdi.Hook) (*cdi.Spec, error) {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		edits.Env = append(edits.Env, k+"="+env[k])
	}
	edits.Hooks = append(edits.Hooks, hooks...)
	spec := &cdi.Spec{Kind: AllocationCDIKind, Devices: []cdi.Device{{Name: name, ContainerEdits: edits}}}
	v, err := cdi.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, fmt.Errorf("CDI spec version: %w", err)
	}
	spec.Version = v
	return spec, nil
}

// writeAllocationSpec writes the spec of container cont of pod into the CDI spec folder, with
// the edits of cards (those the runtime's CDI registry has no device for), and returns the
// qualified device name to hand kubelet (gpushare.io/allocation=<name>), the file validated
// and renamed into place by writeSpecFile.
func (p *Plugin) writeAllocationSpec(pod *corev1.Pod, cont string, cards []gpushare.Device, env map[string]string, hooks []*cdi.Hook) (string, error) {
	name, err := allocationDeviceName(pod.UID, cont)
	if err != nil {
		return "", err
	}
	edits, err := cardEdits(cards, p.minors, p.cfg.SimulatedCardDir, existing(nvidiaControlNodes))
	if err != nil {
		return "", err
	}
	spec, err := allocationSpec(name, edits, env, hooks)
	if err != nil {
		return "", err
	}
	if err := writeSpecFile(allocationSpecPath(p.cfg.CDISpecDir, name), name, spec); err != nil {
		return "", err
	}
	return parser.QualifiedName(AllocationCDIVendor, AllocationCDIClass, name), nil
}

// existing returns the paths of paths that exist.
func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
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

// removeAllocationSpecs removes the spec files, and the simulated limit records, of the pod
// with uid (its grant was released: the pod is gone or finished, and no container of it
// starts again). Failures are logged; the next start's removeStaleAllocationSpecs tries
// again.
func (p *Plugin) removeAllocationSpecs(uid types.UID) {
	if p.cfg.DeviceListStrategy != DeviceListCDIAllocation {
		return
	}
	specs, err := allocationSpecs(p.cfg.CDISpecDir)
	if err != nil {
		klog.ErrorS(err, "Listing the per-allocation CDI specs failed", "dir", p.cfg.CDISpecDir)
		return
	}
	removeSpecFiles(specs[uid])
	p.removeLimitRecords(uid)
}

// removeLimitRecords removes, on simulated cards, the limit records gpushare-limit-hook
// wrote for the containers of the pod with uid, which go with its allocation specs: the
// cards' files would otherwise collect one per container ever started. Failures are logged.
func (p *Plugin) removeLimitRecords(uid types.UID) {
	if p.cfg.SimulatedCardDir == "" {
		return
	}
	if _, err := limithook.RemovePodRecords(p.cfg.SimulatedCardDir, string(uid)); err != nil {
		klog.ErrorS(err, "Removing the simulated limit records of a pod failed", "podUID", uid)
	}
}

// removeStaleAllocationSpecs removes the spec files, and the simulated limit records, of pods
// that no longer may hold memory on this node (not among pods, or finished): left by a
// process that stopped before their pods went. A container of a pod that still holds memory may restart and needs its spec
// again, so those stay. Returns how many files it removed.
func (p *Plugin) removeStaleAllocationSpecs(pods []*corev1.Pod) int {
	specs, err := allocationSpecs(p.cfg.CDISpecDir)
	if err != nil {
		klog.ErrorS(err, "Listing the per-allocation CDI specs failed", "dir", p.cfg.CDISpecDir)
		return 0
	}
	byUID := podsByUID(pods)
	n := 0
	for uid, paths := range specs {
		if pod, ok := byUID[uid]; ok && holdsMemory(pod, p.cfg.NodeName) {
			continue
		}
		n += removeSpecFiles(paths)
		p.removeLimitRecords(uid)
	}
	return n
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
