package deviceplugin

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// Config is what New needs beside the node (noderuntime.Node): the device plugin's own
// flags. Zero durations take the defaults.
type Config struct {
	Resources gpushare.Resources
	// PluginDir is kubelet's device-plugin folder holding kubelet.sock.
	PluginDir string
	// AllocateWait bounds how long Allocate waits for the informer to show the pod (5s).
	AllocateWait time.Duration
	// PodResourcesSocket is kubelet's PodResources API socket, which tells Allocate the pod
	// being admitted; empty: Allocate picks the oldest matching pod.
	PodResourcesSocket string
	// DeviceListStrategy is how Allocate hands cards to the runtime (default
	// DeviceListEnvVar); CDIKind prefixes the CDI device names of DeviceListCDICRI
	// (default nodecards.DefaultCDIKind).
	DeviceListStrategy DeviceListStrategy
	CDIKind            string
	// CDISpecDir is the runtime's CDI spec folder, where DeviceListCDIAllocation writes the
	// per-allocation specs (default nodecards.DefaultCDISpecDir; share-plugin must see it at
	// the same path as the runtime).
	CDISpecDir string
	// CDIRegistryDirs are the CDI spec folders in which DeviceListCDIAllocation looks for the
	// runtime's own device of each card, <CDIKind>=<UUID> (nil: CDISpecDir, /etc/cdi and
	// /var/run/cdi, those share-plugin sees).
	CDIRegistryDirs []string
	// SimulatedCardDir, for simulated cards, is the folder of their files
	// (nodecards.SimulatedCardDir(CDISpecDir), written by nodecards.WriteSimulatedCDISpec),
	// which the per-allocation specs mount instead of device nodes; empty: real cards, or,
	// on a simulated node with DeviceListCDIAllocation, New sets it.
	SimulatedCardDir string
	// MPSRoot is the host folder of the MPS daemons' folders (pkg/mps: <MPSRoot>/<UUID>/<cap>/),
	// used for containers on a node labelled gpushare.io/isolation=mps (default
	// gpushare.DefaultMPSRoot). Allocate writes the want of the daemon a container needs and
	// waits for its ready file, so the plugin sees the folder at the same path, writable.
	MPSRoot string
	// MPSReadyTimeout bounds how long Allocate waits for a container's MPS daemon to be ready
	// (default 30 s); a container whose daemon is not ready by then is refused.
	MPSReadyTimeout time.Duration
	// MPSDaemonOverheadMiB is the GPU memory, in MiB, one MPS daemon's server takes on its
	// card outside every grant; Allocate refuses a container whose grant needs a new daemon on
	// a card without room for its overhead (0: not counted).
	MPSDaemonOverheadMiB int64
	// MPSReleaseGrace is how long a daemon nobody holds is kept after the last Allocate that
	// asked for it (default 2 min): the pod informer may not show a just-admitted pod yet.
	MPSReleaseGrace time.Duration
	// NVIDIARuntimeConfig is the node's NVIDIA container runtime configuration file
	// (preflight.DefaultNVIDIAConfigPath), read at each node publication: its verdict goes
	// to the node label gpushare.LabelEnvDeviceRequests. Empty: not read, no label.
	NVIDIARuntimeConfig string
	// LimitHookPath is the host path of gpushare-limit-hook, which the per-allocation CDI
	// specs name on nodes labelled gpushare.io/isolation=limit (default DefaultLimitHookPath).
	LimitHookPath string
	// NVIDIACDIHookPath, when set, is the host path of NVIDIA's container toolkit hook
	// (nvidia-cdi-hook): the per-allocation specs on limit nodes then hand the limits to its
	// apply-cuda-memory-limits in place of gpushare-limit-hook (nodecards.ToolkitLimitHooks),
	// with NVIDIADriverRoot as its --driver-root (default "/"). The toolkit sets no pod-level
	// limit. Not with simulated cards, which the toolkit's hook cannot limit.
	NVIDIACDIHookPath, NVIDIADriverRoot string
	// LimitHookFailureDir is where the hook leaves a record of each failure (its
	// --failure-dir, host path, share-plugin sees it at the same path), counted on /metrics
	// as gpushare_limit_hook_failures_total; empty: no records, no counter.
	LimitHookFailureDir string
}

// checkCDIConfig defaults CDIKind and, with the cdi-cri strategy, refuses a kind that is not
// a CDI vendor/class: the runtime would reject every device name built from it.
func checkCDIConfig(c *Config) error {
	if c.CDIKind == "" {
		c.CDIKind = nodecards.DefaultCDIKind
	}
	if c.CDISpecDir == "" {
		c.CDISpecDir = nodecards.DefaultCDISpecDir
	}
	switch c.DeviceListStrategy {
	case DeviceListCDICRI:
		return nodecards.CheckCDIKind(c.CDIKind)
	case DeviceListCDIAllocation:
		for _, d := range []string{c.CDISpecDir, c.SimulatedCardDir} {
			if d != "" && (!filepath.IsAbs(d) || filepath.Clean(d) != d) {
				return fmt.Errorf("CDI folder %q: want a clean absolute path", d)
			}
		}
	}
	return nil
}

func (c *Config) validate() error {
	if c.PluginDir == "" {
		return fmt.Errorf("device plugin folder is empty")
	}
	if err := c.Resources.Validate(); err != nil {
		return err
	}
	if c.AllocateWait <= 0 {
		c.AllocateWait = 5 * time.Second
	}
	if c.DeviceListStrategy == "" {
		c.DeviceListStrategy = DeviceListEnvVar
	}
	if _, err := ParseDeviceListStrategy(string(c.DeviceListStrategy)); err != nil {
		return err
	}
	if err := checkCDIConfig(c); err != nil {
		return err
	}
	if c.LimitHookPath == "" {
		c.LimitHookPath = DefaultLimitHookPath
	}
	if !filepath.IsAbs(c.LimitHookPath) || filepath.Clean(c.LimitHookPath) != c.LimitHookPath {
		return fmt.Errorf("limit hook path %q: want a clean absolute path", c.LimitHookPath)
	}
	if err := c.checkToolkitHook(); err != nil {
		return err
	}
	if d := c.LimitHookFailureDir; d != "" && (!filepath.IsAbs(d) || filepath.Clean(d) != d) {
		return fmt.Errorf("limit hook failure folder %q: want a clean absolute path", d)
	}
	if c.MPSRoot == "" {
		c.MPSRoot = gpushare.DefaultMPSRoot
	}
	if !filepath.IsAbs(c.MPSRoot) || filepath.Clean(c.MPSRoot) != c.MPSRoot {
		return fmt.Errorf("MPS root %q: want a clean absolute path", c.MPSRoot)
	}
	if c.MPSReadyTimeout <= 0 {
		c.MPSReadyTimeout = 30 * time.Second
	}
	if c.MPSDaemonOverheadMiB < 0 {
		return fmt.Errorf("MPS daemon overhead %d MiB: want 0 or more", c.MPSDaemonOverheadMiB)
	}
	if c.MPSReleaseGrace <= 0 {
		c.MPSReleaseGrace = 2 * time.Minute
	}
	return nil
}

// DeviceListStrategy is how Allocate hands the chosen cards to the container runtime, as
// NVIDIA's device plugin names the same choice.
type DeviceListStrategy string

const (
	// DeviceListEnvVar sets NVIDIA_VISIBLE_DEVICES to the cards' UUIDs. The NVIDIA container
	// runtime must honour that variable for unprivileged containers, which also lets any pod
	// of the node set it itself and ask for every GPU.
	DeviceListEnvVar DeviceListStrategy = "envvar"
	// DeviceListCDICRI names the cards as CDI devices (<CDIKind>=<UUID>) in the response's
	// CDIDevices, which kubelet (1.28 or later) passes to the runtime through the CRI; the
	// runtime injects them from the node's CDI spec (e.g. `nvidia-ctk cdi generate`) and
	// need not trust environment variables. NVIDIA_VISIBLE_DEVICES is not set.
	DeviceListCDICRI DeviceListStrategy = "cdi-cri"
	// DeviceListCDIAllocation hands each container one CDI device naming its allocation,
	// gpushare.io/allocation=<pod UID>_<container>, from a spec share-plugin writes into
	// CDISpecDir before answering: the cards' device nodes (or simulated cards' files) and
	// the variables Allocate hands over, which the runtime applies after the container's
	// own environment, so a pod's env cannot widen its cards or change its grant. The
	// response itself sets no variable. A card whose device <CDIKind>=<UUID> is in the
	// runtime's CDI registry (CDIRegistryDirs: NVIDIA's spec with UUID names, which brings
	// the driver's libraries) is named by it too, before the allocation's device, whose spec
	// then leaves that card's node to it. The spec is removed when the pod is gone or
	// finished.
	DeviceListCDIAllocation DeviceListStrategy = "cdi-allocation"
)

// ParseDeviceListStrategy reads a --device-list-strategy value. Errors: anything but
// envvar, cdi-cri or cdi-allocation.
func ParseDeviceListStrategy(s string) (DeviceListStrategy, error) {
	switch d := DeviceListStrategy(s); d {
	case DeviceListEnvVar, DeviceListCDICRI, DeviceListCDIAllocation:
		return d, nil
	}
	return "", fmt.Errorf("device list strategy %q: want %s, %s or %s", s, DeviceListEnvVar, DeviceListCDICRI, DeviceListCDIAllocation)
}

// checkToolkitHook defaults NVIDIADriverRoot to "/" and refuses a toolkit hook path or driver
// root that is not a clean absolute path, a driver root without the hook, or the hook with
// simulated cards (SimulatedCardDir set): the toolkit's hook limits real cards only.
func (c *Config) checkToolkitHook() error {
	if c.NVIDIACDIHookPath == "" {
		if c.NVIDIADriverRoot != "" {
			return fmt.Errorf("NVIDIA driver root %q given without NVIDIA's CDI hook: it is the hook's --driver-root", c.NVIDIADriverRoot)
		}
		return nil
	}
	if c.NVIDIADriverRoot == "" {
		c.NVIDIADriverRoot = "/"
	}
	for _, p := range []string{c.NVIDIACDIHookPath, c.NVIDIADriverRoot} {
		if !filepath.IsAbs(p) || filepath.Clean(p) != p {
			return fmt.Errorf("NVIDIA CDI hook path or driver root %q: want a clean absolute path", p)
		}
	}
	if c.SimulatedCardDir != "" {
		return fmt.Errorf("NVIDIA's CDI hook %s cannot limit simulated cards: leave it unset with simulated cards", c.NVIDIACDIHookPath)
	}
	return nil
}
