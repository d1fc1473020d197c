package dra

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
	"github.com/gpushare/gpushare/pkg/noderuntime"
)

// Config is what share-plugin --backend=dra hands the DRA back end beside the node
// (noderuntime.Node).
type Config struct {
	// MemResource is the device plugin's memory extended resource (share-plugin's
	// --mem-resource): pods that still request it on the node keep the plugin from starting.
	// Empty: gpushare.DefaultMemResource.
	MemResource corev1.ResourceName
	// CDISpecDir is the runtime's CDI spec folder, where the claims' specs go.
	CDISpecDir string
	// CDIKind is the kind of the runtime's own card devices (share-plugin's --cdi-kind):
	// the simulated cards' spec is written with it, and a card the runtime's CDI registry
	// holds a <kind>=<UUID> device for is handed over through it (DriverConfig.CDIKind).
	// Empty: nodecards.DefaultCDIKind.
	CDIKind string
	// PluginDataDir holds the plugin's socket and checkpoint; empty: kubelet's default,
	// /var/lib/kubelet/plugins/<driver>.
	PluginDataDir string
	// RegistrarDir is kubelet's plugin registration folder; empty: kubelet's default.
	RegistrarDir string
	// LimitHookPath is gpushare-limit-hook's path on the host.
	LimitHookPath string
	// LimitHookFailureDir is where the hook leaves a record of each failure, counted on
	// Serve's /metrics as gpushare_limit_hook_failures_total; empty: no records, no counter.
	LimitHookFailureDir string
	// Serve serves the plugin's /metrics, /healthz and /readyz until its context is done;
	// nil: they are not served.
	Serve func(context.Context, http.Handler)
}

// Plugin is the DRA back end of one node: New builds it over the node, Run serves it.
type Plugin struct {
	cfg  Config
	node *noderuntime.Node
}

// New is the DRA back end of node, with cfg's defaults filled in. It starts nothing; call
// Run. Errors: no node.
func New(cfg Config, node *noderuntime.Node) (*Plugin, error) {
	if node == nil {
		return nil, errors.New("the DRA back end needs the node")
	}
	if cfg.MemResource == "" {
		cfg.MemResource = gpushare.DefaultMemResource
	}
	if cfg.CDIKind == "" {
		cfg.CDIKind = nodecards.DefaultCDIKind
	}
	if cfg.PluginDataDir == "" {
		cfg.PluginDataDir = filepath.Join(kubeletplugin.KubeletPluginsDir, gpushare.DRADriverName)
	}
	return &Plugin{cfg: cfg, node: node}, nil
}

// Run serves the node's cards through DRA until ctx is done: it checks that the node is
// labelled for this back end and that none of its pods holds memory through the device
// plugin (checkNode), writes the simulated cards' files and the plugin's folder
// (prepareFolders), registers the plugin with kubelet, and publishes the node's
// ResourceSlice again on every change of a card's health (serve). Errors: a node not
// labelled gpushare.LabelBackend=dra, pods on the node that still hold memory through the
// device-plugin back end or that cannot be listed (checkDevicePluginPods), an API server
// older than Kubernetes 1.36 or without consumable capacity (checkAPIServer,
// checkCapacityKept), a checkpoint that cannot be read, or kubelet's plugin sockets that
// cannot be served.
func (p *Plugin) Run(ctx context.Context) error {
	node, err := p.checkNode(ctx)
	if err != nil {
		return err
	}
	specs, err := p.prepareFolders()
	if err != nil {
		return err
	}
	if p.node.Usage().Interval > 0 { // the pod informer is the watchdog's pod view only
		stopPods := p.node.StartPods(ctx)
		defer stopPods()
	}
	return p.serve(ctx, node, specs)
}

// nodeIsolation reads the node's isolation label from the API at each call: a claim is
// prepared by the label as it is then, as the device plugin's Allocate does. Each node read
// goes to seen too.
func nodeIsolation(client kubernetes.Interface, name string, seen func(context.Context, *corev1.Node)) func(context.Context) (gpushare.Isolation, error) {
	return func(ctx context.Context) (gpushare.Isolation, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		seen(ctx, node)
		return gpushare.NodeIsolation(node.Labels)
	}
}
