package deviceplugin

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/gpushare/gpushare/pkg/gpushare"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
	"github.com/gpushare/gpushare/pkg/policy"
)

// socketName is the plugin's socket in the device-plugin folder (the old plugin's name).
const socketName = "aliyungpushare.sock"

// Config is what New needs. Zero durations take the defaults.
type Config struct {
	NodeName  string
	Resources gpushare.Resources
	Unit      gpushare.Unit
	// PluginDir is kubelet's device-plugin folder holding kubelet.sock.
	PluginDir string
	NVML      gpunvml.Interface
	Client    kubernetes.Interface
	// Pods is an informer over the pods of NodeName only (field selector
	// spec.nodeName=NodeName); its owner starts it.
	Pods cache.SharedIndexInformer
	// Clock drives health recovery and node resync (default: the real clock).
	Clock clock.WithTicker
	// HealthRecovery is how long a card must be free of faults to be healthy again (5m).
	HealthRecovery time.Duration
	// NodeResync is how often node facts are re-checked (1m); kubelet may zero gpu-count.
	NodeResync time.Duration
	// AllocateWait bounds how long Allocate waits for the informer to show the pod (5s).
	AllocateWait time.Duration
	// ReportUsedMemory exports NVML used memory per card (real NVML only).
	ReportUsedMemory bool
	// PodResourcesSocket is kubelet's PodResources API socket, which tells Allocate the pod
	// being admitted; empty: Allocate picks the oldest matching pod.
	PodResourcesSocket string
	// Recorder receives the events on pods (default: none are sent).
	Recorder record.EventRecorder
	// DeviceListStrategy is how Allocate hands cards to the runtime (default
	// DeviceListEnvVar); CDIKind prefixes the CDI device names of DeviceListCDICRI
	// (default DefaultCDIKind).
	DeviceListStrategy DeviceListStrategy
	CDIKind            string
	// MPSRoot is the host folder of the cards' MPS daemon folders, <MPSRoot>/<UUID>/..., used
	// for containers on a node labelled gpushare.io/isolation=mps (default gpushare.DefaultMPSRoot).
	// Allocate reads <MPSRoot>/<UUID>/ready, so the plugin sees the folder at the same path.
	MPSRoot string
	// UsageInterval is how often the usage watchdog lists the cards' processes and judges
	// each container against its grant (watchdog.go); 0: no watchdog.
	UsageInterval time.Duration
	// OverGrant is the watchdog's threshold, grace and action.
	OverGrant OverGrant
	// ProcRoot is where the watchdog reads /proc/<pid>/cgroup (default /proc; share-plugin
	// needs the host's PID namespace).
	ProcRoot string
}

// checkCDIConfig defaults CDIKind and, with the cdi-cri strategy, refuses a kind that is not
// a CDI vendor/class: the runtime would reject every device name built from it.
func checkCDIConfig(c *Config) error {
	if c.CDIKind == "" {
		c.CDIKind = DefaultCDIKind
	}
	if c.DeviceListStrategy != DeviceListCDICRI {
		return nil
	}
	return checkCDIKind(c.CDIKind)
}

func (c *Config) validate() error {
	switch {
	case c.NodeName == "":
		return fmt.Errorf("node name is empty")
	case c.Unit.MiB <= 0:
		return fmt.Errorf("memory unit is not set")
	case c.PluginDir == "":
		return fmt.Errorf("device plugin folder is empty")
	case c.NVML == nil || c.Client == nil || c.Pods == nil:
		return fmt.Errorf("NVML, API client and pod informer are required")
	}
	if err := c.Resources.Validate(); err != nil {
		return err
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.HealthRecovery <= 0 {
		c.HealthRecovery = 5 * time.Minute
	}
	if c.NodeResync <= 0 {
		c.NodeResync = time.Minute
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
	if c.MPSRoot == "" {
		c.MPSRoot = gpushare.DefaultMPSRoot
	}
	if !filepath.IsAbs(c.MPSRoot) || filepath.Clean(c.MPSRoot) != c.MPSRoot {
		return fmt.Errorf("MPS root %q: want a clean absolute path", c.MPSRoot)
	}
	if c.UsageInterval < 0 {
		return fmt.Errorf("usage interval %v is negative", c.UsageInterval)
	}
	if err := c.OverGrant.validate(); err != nil {
		return err
	}
	if c.Recorder == nil {
		c.Recorder = &record.FakeRecorder{} // no Events channel: drops every event
	}
	return nil
}

// Plugin is the device plugin of one node.
type Plugin struct {
	// Embedded so that methods added to the API in later kubelet versions answer
	// Unimplemented instead of breaking the build.
	pluginapi.UnimplementedDevicePluginServer

	cfg    Config
	cards  cardSet
	health *health
	// registered is notified after each successful registration with kubelet.
	registered *broadcast

	policy policy.Policy // places pods without a valid allocation
	// ambiguous counts Allocates that kubelet's PodResources did not settle, by reason.
	ambiguous *prometheus.CounterVec

	mu sync.Mutex // serialises Allocate and GetPreferredAllocation; guards listFailing
	// listFailing is true while PodResources calls fail (the failure is logged once).
	listFailing bool

	recMu sync.Mutex // guards rec; Allocate holds mu too, /served and metrics only recMu
	rec   records

	regMu sync.Mutex
	isReg bool

	usage *watchdog // runs when UsageInterval > 0
}

// New discovers the cards through NVML and checks that their fake devices fit in one
// ListAndWatch message. It starts nothing; call Run.
func New(cfg Config) (*Plugin, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("device plugin config: %w", err)
	}
	devs, err := cfg.NVML.Devices()
	if err != nil {
		return nil, fmt.Errorf("listing GPUs: %w", err)
	}
	cards, err := buildCards(devs, cfg.Unit)
	if err != nil {
		return nil, err
	}
	if err := checkMessageSize(cards, cfg.Unit); err != nil {
		return nil, err
	}
	pol, err := policy.New(placementPolicy)
	if err != nil {
		return nil, err
	}
	p := &Plugin{
		cfg:        cfg,
		cards:      newCardSet(cards),
		health:     newHealth(cfg.Clock, cfg.HealthRecovery, cards),
		registered: newBroadcast(),
		policy:     pol,
		ambiguous: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_plugin_allocate_ambiguous_total",
			Help: "Allocate calls whose pod kubelet's PodResources API did not single out, served to the oldest matching pod, by reason (several, none, unavailable).",
		}, []string{"reason"}),
		rec: records{},
	}
	p.usage = newWatchdog(p)
	// The informer's events keep the records current between Allocate calls: a pod deleted
	// soon after it was served (a Deployment scaled down, a namespace removed) frees its
	// cards at once, even when no Allocate ran while the pod view showed it.
	if _, err := cfg.Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.podSeen,
		UpdateFunc: func(_, obj any) { p.podSeen(obj) },
		DeleteFunc: p.podGone,
	}); err != nil {
		return nil, fmt.Errorf("watching the node's pods: %w", err)
	}
	return p, nil
}

// Cards returns the cards the plugin advertises, in index order, with their health now.
func (p *Plugin) Cards() []gpushare.Device {
	return inventory(p.cards.list, p.cfg.Unit, p.health.Healthy).Devices
}

func (p *Plugin) socketPath() string  { return filepath.Join(p.cfg.PluginDir, socketName) }
func (p *Plugin) kubeletPath() string { return filepath.Join(p.cfg.PluginDir, "kubelet.sock") }
