package deviceplugin

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	cdi "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// DefaultLimitHookPath is where the share-plugin DaemonSet installs gpushare-limit-hook on
// the host (share-plugin's --limit-hook-path).
const DefaultLimitHookPath = "/var/lib/gpushare/bin/gpushare-limit-hook"

// limitUnavailable says why this node cannot enforce gpushare.IsolationLimit: the hook
// rides on the per-allocation CDI spec, so it needs the cdi-allocation strategy, and the
// driver must support per-cgroup limits (Config.LimitUnsupported). nil: it can.
func (p *Plugin) limitUnavailable() error {
	if p.cfg.DeviceListStrategy != DeviceListCDIAllocation {
		return fmt.Errorf("the limit hook is named by the per-allocation CDI spec, and share-plugin runs with --device-list-strategy=%s, not %s",
			p.cfg.DeviceListStrategy, DeviceListCDIAllocation)
	}
	return p.cfg.LimitUnsupported
}

// enforcedIsolation is what the node really enforces for the mode its label asks: iso, or
// IsolationNone where iso is IsolationLimit and the node cannot enforce it (Allocate then
// refuses its GPU containers, so none runs believing it is limited).
func (p *Plugin) enforcedIsolation(iso gpushare.Isolation) gpushare.Isolation {
	if iso == gpushare.IsolationLimit && p.limitUnavailable() != nil {
		return gpushare.IsolationNone
	}
	return iso
}

// limitHook is LimitHook for a container holding units[i] units on cards[i], with this
// plugin's hook path, simulated cards and unit.
func (p *Plugin) limitHook(cards []gpushare.Device, units []int64) *cdi.Hook {
	return LimitHook(p.cfg.LimitHookPath, p.cfg.SimulatedCardDir, p.cfg.Unit, cards, units)
}

// eventIsolationUnavailable (Warning, on the node): the node's isolation label asks for a
// mode the node cannot enforce; Allocate refuses its GPU containers until that is fixed.
const eventIsolationUnavailable = "GPUShareIsolationUnavailable"

// publishEnforcedIsolation publishes what this plugin enforces for the node's isolation
// label (PublishEnforcedIsolation with enforcedIsolation).
func (p *Plugin) publishEnforcedIsolation(ctx context.Context, node *corev1.Node) error {
	return PublishEnforcedIsolation(ctx, p.cfg.Client, p.cfg.Recorder, node, func(iso gpushare.Isolation) (gpushare.Isolation, error) {
		if e := p.enforcedIsolation(iso); e != iso {
			return e, p.limitUnavailable()
		}
		return iso, nil
	})
}

// PublishEnforcedIsolation sets the node's gpushare.LabelIsolationEnforced to what the node
// really enforces for its gpushare.LabelIsolation, as enforced says (with why, when it
// differs), or removes it from a node without a valid isolation label. When the two differ
// it says why in the log and, with a recorder, in a Warning event on the node, once per
// change of the label.
func PublishEnforcedIsolation(ctx context.Context, client kubernetes.Interface, recorder record.EventRecorder, node *corev1.Node,
	enforced func(asked gpushare.Isolation) (gpushare.Isolation, error)) error {
	v, labelled := node.Labels[gpushare.LabelIsolation]
	var want *string
	var why error
	if iso, err := gpushare.ParseIsolation(v); labelled && err == nil {
		var e gpushare.Isolation
		e, why = enforced(iso)
		want = (*string)(&e)
	}
	cur, has := node.Labels[gpushare.LabelIsolationEnforced]
	if want == nil && !has || want != nil && has && cur == *want {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{gpushare.LabelIsolationEnforced: want}}})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling node %s with %s: %w", node.Name, gpushare.LabelIsolationEnforced, err)
	}
	if want == nil {
		return nil
	}
	klog.InfoS("Published the enforced isolation", "node", node.Name, "asked", v, "enforced", *want)
	if *want != v {
		klog.ErrorS(why, "The node's isolation label asks for a mode it cannot enforce; its GPU containers are refused", "node", node.Name, "label", v)
		if recorder != nil {
			recorder.Eventf(node, corev1.EventTypeWarning, eventIsolationUnavailable,
				"node is labelled %s=%s but share-plugin cannot enforce it (%s=%s): %v; GPU containers are refused until the label or the node is fixed",
				gpushare.LabelIsolation, v, gpushare.LabelIsolationEnforced, *want, why)
		}
	}
	return nil
}
