package nodecards

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

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// EventIsolationUnavailable (Warning, on the node): the node's isolation label asks for a
// mode the node cannot enforce; the back end refuses its GPU containers until that is fixed.
const EventIsolationUnavailable = "GPUShareIsolationUnavailable"

// PublishEnforcedIsolation sets the node's gpushare.LabelIsolationEnforced to what the node
// really enforces for its gpushare.LabelIsolation, as enforced says (with why, when it
// differs), or removes it from a node without a valid isolation label. When the two differ
// it says why in the log and, with a recorder, in a Warning event on the node, once per
// change of the label. Errors: the patch of the node fails.
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
			recorder.Eventf(node, corev1.EventTypeWarning, EventIsolationUnavailable,
				"node is labelled %s=%s but share-plugin cannot enforce it (%s=%s): %v; GPU containers are refused until the label or the node is fixed",
				gpushare.LabelIsolation, v, gpushare.LabelIsolationEnforced, *want, why)
		}
	}
	return nil
}
