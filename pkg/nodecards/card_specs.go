package nodecards

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// CardSpecs is how the cards of a node are shown to a container through CDI: the runtime's
// spec folder, each card's device-node minor number by UUID (real cards) or the folder of
// the simulated cards' files (SimulatedCardDir; simulated cards). Both back ends write
// their per-container specs through it (WriteAllocationSpec, WriteClaimSpec).
type CardSpecs struct {
	// Dir is the runtime's CDI spec folder.
	Dir string
	// Minors is each card's /dev/nvidia<minor> number by UUID (-1: NVML did not tell).
	Minors map[string]int
	// SimulatedCardDir, when set, is where the simulated cards' files are; cards are then
	// mounted from it instead of given as device nodes.
	SimulatedCardDir string
}

// nvidiaControlNodes are the device nodes besides /dev/nvidia<minor> that a CUDA process
// opens, as NVIDIA's CDI spec lists them (nvidia-ctk cdi generate); each goes into a spec
// only when it exists, since the runtime fails a container whose spec names a missing node.
var nvidiaControlNodes = []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}

// ControlNodes are the paths of NVIDIA's control device nodes (/dev/nvidiactl,
// /dev/nvidia-uvm, /dev/nvidia-uvm-tools) that exist on this host now: what a spec for
// real cards adds after the cards' own nodes.
func ControlNodes() []string { return existing(nvidiaControlNodes) }

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

// writeSpecFile writes spec, whose device is name, to path in the CDI spec folder: under a
// temporary name first (not *.json, which the runtime skips), loaded back with the CDI
// library's own reader (the validation runtimes apply) and only then renamed into place,
// so the runtime never reads half a spec or an invalid one.
func writeSpecFile(path, name string, spec *cdi.Spec) error {
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the CDI spec of %s: %w", name, err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the CDI spec folder: %w", err)
	}
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the CDI spec of %s: %w", name, err)
	}
	if _, err := cdiapi.ReadSpec(tmp, 0); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("the CDI spec of %s does not validate: %w", name, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing the CDI spec of %s: %w", name, err)
	}
	return nil
}

// writeDevice writes to path the CDI spec of kind with one device, name, whose edits give
// cards (cardEdits), set env, sorted by key so that equal grants write equal files, and add
// hooks (the limit hook on a limit node): the one builder of the per-allocation and
// per-claim specs. Errors: a real card without a minor number, or a file that cannot be
// written (writeSpecFile).
func (s CardSpecs) writeDevice(path, kind, name string, cards []gpushare.Device, env map[string]string, hooks []*cdi.Hook) error {
	edits, err := cardEdits(cards, s.Minors, s.SimulatedCardDir, ControlNodes())
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		edits.Env = append(edits.Env, k+"="+env[k])
	}
	edits.Hooks = append(edits.Hooks, hooks...)
	spec := &cdi.Spec{Kind: kind, Devices: []cdi.Device{{Name: name, ContainerEdits: edits}}}
	v, err := cdi.MinimumRequiredVersion(spec)
	if err != nil {
		return fmt.Errorf("CDI spec version: %w", err)
	}
	spec.Version = v
	return writeSpecFile(path, name, spec)
}
