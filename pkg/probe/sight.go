package probe

import (
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// Sight is what the container was handed, read without the driver: the variables
// share-plugin's Allocate (or the per-allocation CDI spec) sets, the simulated cards' files
// the runtime mounted, and the NVIDIA device nodes.
type Sight struct {
	// VisibleDevices is NVIDIA_VISIBLE_DEVICES, and VisibleSet whether it is set at all.
	VisibleDevices string `json:"visibleDevices,omitempty"`
	VisibleSet     bool   `json:"-"`
	// SimulatedCards are the UUIDs of the files in gpushare.SimulatedGPUDir, sorted.
	SimulatedCards []string `json:"simulatedCards,omitempty"`
	// DeviceNodes are the card device nodes /dev/nvidia<N>, sorted.
	DeviceNodes []string `json:"deviceNodes,omitempty"`
	// GrantUnits is ALIYUN_COM_GPU_MEM_CONTAINER (gpu-mem units, all cards together), and
	// HasGrant whether it parsed.
	GrantUnits int64 `json:"grantUnits,omitempty"`
	HasGrant   bool  `json:"-"`
	// MPSPipeDir is CUDA_MPS_PIPE_DIRECTORY, MPSLimit CUDA_MPS_PINNED_DEVICE_MEM_LIMIT.
	MPSPipeDir string `json:"mpsPipeDir,omitempty"`
	MPSLimit   string `json:"mpsLimit,omitempty"`
}

// deviceNode matches a card's device node (not nvidiactl, nvidia-uvm, nvidia-caps …).
var deviceNode = regexp.MustCompile(`^nvidia[0-9]+$`)

// Look reads the Sight of the running container: getenv reads its environment (os.LookupEnv)
// and root is its file system from "/" (os.DirFS("/")). Folders that are absent or unreadable
// count as empty: a container without a card has neither.
func Look(getenv func(string) (string, bool), root fs.FS) Sight {
	var s Sight
	s.VisibleDevices, s.VisibleSet = getenv(gpushare.EnvVisibleDevices)
	if v, ok := getenv(gpushare.EnvContainerUnits); ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n >= 0 {
			s.GrantUnits, s.HasGrant = n, true
		}
	}
	s.MPSPipeDir, _ = getenv(gpushare.EnvMPSPipeDirectory)
	s.MPSLimit, _ = getenv(gpushare.EnvMPSPinnedMemLimit)
	s.SimulatedCards = names(root, strings.TrimPrefix(gpushare.SimulatedGPUDir, "/"), nil)
	s.DeviceNodes = names(root, "dev", deviceNode)
	for i, n := range s.DeviceNodes {
		s.DeviceNodes[i] = path.Join("/dev", n)
	}
	return s
}

// names lists the entries of dir in root (those match accepts, when not nil), sorted.
func names(root fs.FS, dir string, match *regexp.Regexp) []string {
	entries, err := fs.ReadDir(root, dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if match == nil || match.MatchString(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// visibleAll reports NVIDIA_VISIBLE_DEVICES=all: the runtime gives every card of the node.
func (s Sight) visibleAll() bool { return strings.TrimSpace(s.VisibleDevices) == "all" }

// VisibleUUIDs are the cards NVIDIA_VISIBLE_DEVICES names (none for "", "none", "void" and
// "all", which visibleAll reports).
func (s Sight) VisibleUUIDs() []string {
	switch v := strings.TrimSpace(s.VisibleDevices); v {
	case "", "none", "void", "all":
		return nil
	default:
		var out []string
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
		sort.Strings(out)
		return out
	}
}

// Handover names how cards reached the container, as seen from inside: "env"
// (NVIDIA_VISIBLE_DEVICES names cards), "files" (simulated cards' files from a CDI spec),
// "devices" (device nodes), joined by "+"; "none" when nothing did.
func (s Sight) Handover() string {
	var parts []string
	if s.visibleAll() || len(s.VisibleUUIDs()) > 0 {
		parts = append(parts, "env")
	}
	if len(s.SimulatedCards) > 0 {
		parts = append(parts, "files")
	}
	if len(s.DeviceNodes) > 0 {
		parts = append(parts, "devices")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}
