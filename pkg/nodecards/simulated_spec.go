package nodecards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"tags.cncf.io/container-device-interface/pkg/parser"
	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// DefaultCDISpecDir is the CDI spec folder containerd and CRI-O read by default.
const DefaultCDISpecDir = "/var/run/cdi"

// DefaultCDIKind is the CDI vendor/class of NVIDIA's CDI spec, whose devices are named by
// card UUID among others.
const DefaultCDIKind = "nvidia.com/gpu"

// Where the simulated cards' CDI spec puts things.
const (
	// simulatedCDISpecFile is the spec's file name in the CDI spec folder.
	simulatedCDISpecFile = "gpushare-simulated.json"
	// simulatedCardDir is the folder, inside the CDI spec folder, of the files that stand in
	// for the cards' device nodes. The CDI registry does not descend into sub-folders.
	simulatedCardDir = "gpushare-simulated"
)

// simulatedCard is the JSON content of a simulated card's file.
type simulatedCard struct {
	Index     int    `json:"index"`
	UUID      string `json:"uuid"`
	Model     string `json:"model"`
	MemoryMiB int64  `json:"memoryMiB"`
}

// simulatedCDISpec is the CDI spec of simulated cards: one device per card, named by its
// UUID under kind (e.g. nvidia.com/gpu=GPU-…, the names Allocate returns with the cdi-cri
// strategy), whose edit bind-mounts the card's file from cardDir read-only at
// gpushare.SimulatedGPUDir/<UUID>. A real GPU's spec (nvidia-ctk cdi generate) adds device
// nodes and driver libraries instead; a mount is what a simulated card can show a container.
// Errors: a kind or UUID that is not a valid CDI name.
func simulatedCDISpec(kind, cardDir string, cards []gpushare.Device) (*cdi.Spec, error) {
	if err := CheckCDIKind(kind); err != nil {
		return nil, err
	}
	spec := &cdi.Spec{Kind: kind, Devices: make([]cdi.Device, 0, len(cards))}
	for _, c := range cards {
		if err := parser.ValidateDeviceName(c.UUID); err != nil {
			return nil, fmt.Errorf("card %d: UUID %q as a CDI device name: %w", c.Index, c.UUID, err)
		}
		spec.Devices = append(spec.Devices, cdi.Device{
			Name:           c.UUID,
			ContainerEdits: cdi.ContainerEdits{Mounts: []*cdi.Mount{simulatedCardMount(cardDir, c.UUID)}},
		})
	}
	v, err := cdi.MinimumRequiredVersion(spec)
	if err != nil {
		return nil, fmt.Errorf("CDI spec version: %w", err)
	}
	spec.Version = v
	return spec, nil
}

// SimulatedCardDir is the folder, in the CDI spec folder dir, of the simulated cards' files
// that WriteSimulatedCDISpec writes.
func SimulatedCardDir(dir string) string { return filepath.Join(dir, simulatedCardDir) }

// simulatedCardMount shows the simulated card uuid's file in cardDir to a container,
// read-only, at gpushare.SimulatedGPUDir/<uuid>.
func simulatedCardMount(cardDir, uuid string) *cdi.Mount {
	return &cdi.Mount{
		HostPath:      filepath.Join(cardDir, uuid),
		ContainerPath: gpushare.SimulatedGPUDir + "/" + uuid,
		Options:       []string{"ro", "bind"},
	}
}

// WriteSimulatedCDISpec writes the simulated cards' files and their CDI spec
// (simulatedCDISpecFile) into dir, the runtime's CDI spec folder, each file replaced
// atomically so the runtime never reads half a spec. Returns the spec's path. Errors: an
// invalid kind or UUID, or a file that cannot be written.
func WriteSimulatedCDISpec(dir, kind string, cards []gpushare.Device) (string, error) {
	cardDir := SimulatedCardDir(dir)
	spec, err := simulatedCDISpec(kind, cardDir, cards)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cardDir, 0o755); err != nil {
		return "", fmt.Errorf("creating the simulated cards' folder: %w", err)
	}
	for _, c := range cards {
		b, err := json.Marshal(simulatedCard{Index: c.Index, UUID: c.UUID, Model: c.Model, MemoryMiB: c.MemoryMiB})
		if err != nil {
			return "", fmt.Errorf("encoding simulated card %d: %w", c.Index, err)
		}
		if err := writeAtomic(filepath.Join(cardDir, c.UUID), append(b, '\n')); err != nil {
			return "", err
		}
	}
	b, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding the CDI spec: %w", err)
	}
	path := filepath.Join(dir, simulatedCDISpecFile)
	if err := writeAtomic(path, append(b, '\n')); err != nil {
		return "", err
	}
	return path, nil
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// CheckCDIKind accepts a CDI kind, vendor/class, by the CDI specification's naming rules.
// Errors: no '/', or a vendor or class the rules refuse.
func CheckCDIKind(kind string) error {
	vendor, class, ok := strings.Cut(kind, "/")
	if !ok {
		return fmt.Errorf("CDI kind %q: want vendor/class, e.g. %s", kind, DefaultCDIKind)
	}
	if err := parser.ValidateVendorName(vendor); err != nil {
		return fmt.Errorf("CDI kind %q: %w", kind, err)
	}
	if err := parser.ValidateClassName(class); err != nil {
		return fmt.Errorf("CDI kind %q: %w", kind, err)
	}
	return nil
}
