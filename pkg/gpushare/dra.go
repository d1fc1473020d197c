package gpushare

import "fmt"

// Names of the DRA back end: the kubelet DRA plugin publishes one device per card in a
// ResourceSlice of this driver, and claims ask for part of its memory capacity.
const (
	// DRADriverName is the DRA driver, the DeviceClass's name and the domain of the devices'
	// attributes and capacities.
	DRADriverName = "gpu-mem.gpushare.io"
	// DRACapacityMemory is the consumable capacity of a card device: its memory in bytes,
	// whole units of the node's unit (a claim asks capacity.requests.memory: 4Gi).
	DRACapacityMemory = "memory"
	// DRAAttributeUUID, DRAAttributeIndex and DRAAttributeProductName are a card device's
	// attributes: its NVML UUID ("GPU-…", string), NVML index (int) and product name
	// ("Tesla T4", string).
	DRAAttributeUUID        = "uuid"
	DRAAttributeIndex       = "index"
	DRAAttributeProductName = "productName"
	// DRATaintUnhealthy is the device taint of a card that takes no new work; its value is
	// the decimal XID of the card's latest critical fault.
	DRATaintUnhealthy = DRADriverName + "/unhealthy"
)

// LabelBackend is the node label that names which back end serves the node's cards:
// BackendDevicePlugin (also when the label is absent) or BackendDRA. One node is served by
// one back end; share-plugin refuses to start in a mode the label does not name.
const LabelBackend = "gpushare.io/backend"

// Backend is a node's back end, the value of LabelBackend.
type Backend string

const (
	// BackendDevicePlugin is the kubelet device plugin advertising aliyun.com/gpu-mem units.
	BackendDevicePlugin Backend = "device-plugin"
	// BackendDRA is the kubelet DRA plugin publishing DRADriverName ResourceSlices.
	BackendDRA Backend = "dra"
)

// ParseBackend reads a LabelBackend value; "" (no label) is BackendDevicePlugin. Errors: any
// other value, naming the label and the accepted values.
func ParseBackend(v string) (Backend, error) {
	switch b := Backend(v); b {
	case "":
		return BackendDevicePlugin, nil
	case BackendDevicePlugin, BackendDRA:
		return b, nil
	}
	return "", fmt.Errorf("node label %s=%q: want %s or %s", LabelBackend, v, BackendDevicePlugin, BackendDRA)
}

// CheckBackend accepts a node whose LabelBackend names want, the back end about to serve
// it. Errors: a malformed label, or one naming the other back end (two back ends on one
// node would each hand out the whole card).
func CheckBackend(labels map[string]string, want Backend) error {
	got, err := ParseBackend(labels[LabelBackend])
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("node label %s=%s: this node is served by the %s back end, not %s", LabelBackend, got, got, want)
	}
	return nil
}
