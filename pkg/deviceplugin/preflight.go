package deviceplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/preflight"
)

// runtimePreflight keeps the last verdict on the node's NVIDIA runtime configuration
// (Config.NVIDIARuntimeConfig) for the node label, the event and the metric.
type runtimePreflight struct {
	node  string
	state *prometheus.Desc

	mu   sync.Mutex // guards last: written by the node publisher, read at scrape time
	last *preflight.Verdict
}

func newRuntimePreflight(node string) *runtimePreflight {
	return &runtimePreflight{node: node, state: prometheus.NewDesc("gpushare_node_env_device_requests",
		"1 for the node's verdict on device requests a pod makes in its own environment (NVIDIA_VISIBLE_DEVICES), from its NVIDIA container runtime configuration: state accepted (a tenant can widen its cards), refused or unknown; 0 for the others. Absent without --nvidia-runtime-config.",
		[]string{"node", "state"}, nil)}
}

// record stores v and reports whether it differs from the last verdict.
func (r *runtimePreflight) record(v preflight.Verdict) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := r.last == nil || *r.last != v
	r.last = &v
	return changed
}

func (r *runtimePreflight) Describe(ch chan<- *prometheus.Desc) { ch <- r.state }

func (r *runtimePreflight) Collect(ch chan<- prometheus.Metric) {
	r.mu.Lock()
	last := r.last
	r.mu.Unlock()
	if last == nil {
		return
	}
	for _, s := range []gpushare.EnvDeviceRequests{gpushare.EnvDeviceRequestsAccepted, gpushare.EnvDeviceRequestsRefused, gpushare.EnvDeviceRequestsUnknown} {
		ch <- prometheus.MustNewConstMetric(r.state, prometheus.GaugeValue, boolFloat(last.State == s), r.node, string(s))
	}
}

// publishPreflight reads the node's NVIDIA runtime configuration and makes the node say what
// it found: the label gpushare.LabelEnvDeviceRequests (patched only when it differs) and,
// when the verdict changes to one where tenants must be assumed able to widen their cards,
// a Warning event on the node. Nothing without Config.NVIDIARuntimeConfig.
func (p *Plugin) publishPreflight(ctx context.Context, node *corev1.Node) error {
	if p.cfg.NVIDIARuntimeConfig == "" {
		return nil
	}
	v := preflight.Check(p.cfg.NVIDIARuntimeConfig)
	if p.preflight.record(v) {
		if v.Unsafe {
			klog.ErrorS(nil, "Tenants can widen their cards on this node", "state", v.State, "mode", v.Mode, "reason", v.Reason)
			p.node.Recorder().Eventf(node, corev1.EventTypeWarning, gpushare.EventEnvDeviceRequestsAccepted,
				"%s. A pod's own NVIDIA_VISIBLE_DEVICES can reach every GPU of the node whatever share-plugin handed it: set accept-nvidia-visible-devices-envvar-when-unprivileged = false (docs/share-plugin.md, \"Node preflight\")", v.Reason)
		} else {
			klog.InfoS("NVIDIA container runtime configuration read", "state", v.State, "mode", v.Mode, "reason", v.Reason)
		}
	}
	if node.Labels[gpushare.LabelEnvDeviceRequests] == string(v.State) {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{
		gpushare.LabelEnvDeviceRequests: string(v.State),
	}}})
	if err != nil {
		return err
	}
	if _, err := p.node.Client().CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling node %s %s=%s: %w", node.Name, gpushare.LabelEnvDeviceRequests, v.State, err)
	}
	return nil
}
