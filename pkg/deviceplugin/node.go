package deviceplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// publishRetry is the wait before publishing node facts again after a failure.
const publishRetry = 5 * time.Second

// publishNode makes the node show the plugin's facts: gpu-count (number of cards) in status
// capacity and allocatable, the per-card inventory annotation with current health, and the
// verdict on its NVIDIA runtime configuration (publishPreflight) and the isolation it
// enforces (publishEnforcedIsolation). It patches only what differs, so calling it often is
// cheap.
func (p *Plugin) publishNode(ctx context.Context) error {
	node, err := p.node.Client().CoreV1().Nodes().Get(ctx, p.node.Name(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting node %s: %w", p.node.Name(), err)
	}
	return errors.Join(p.publishInventory(ctx, node), p.publishPreflight(ctx, node))
}

// publishInventory patches the node's inventory annotation and its gpu-count where they
// differ from the plugin's.
func (p *Plugin) publishInventory(ctx context.Context, node *corev1.Node) error {
	inv, err := nodecards.Inventory(p.cards.List(), p.node.Unit(), p.health.Healthy).Marshal()
	if err != nil {
		return err
	}
	if node.Annotations[gpushare.AnnotationNodeInventory] != inv {
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			gpushare.AnnotationNodeInventory: inv,
		}}})
		if err != nil {
			return err
		}
		if _, err := p.node.Client().CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("annotating node %s with its GPU inventory: %w", node.Name, err)
		}
		klog.InfoS("Published GPU inventory", "node", node.Name, "inventory", inv)
	}
	if err := p.publishEnforcedIsolation(ctx, node); err != nil {
		return err
	}
	count := *resource.NewQuantity(int64(len(p.cards.List())), resource.DecimalSI)
	capQ, okC := node.Status.Capacity[p.cfg.Resources.Count]
	allocQ, okA := node.Status.Allocatable[p.cfg.Resources.Count]
	if okC && okA && capQ.Cmp(count) == 0 && allocQ.Cmp(count) == 0 {
		return nil
	}
	n := strconv.Itoa(len(p.cards.List()))
	name := string(p.cfg.Resources.Count)
	body, err := json.Marshal(map[string]any{"status": map[string]any{
		"capacity":    map[string]string{name: n},
		"allocatable": map[string]string{name: n},
	}})
	if err != nil {
		return err
	}
	if _, err := p.node.Client().CoreV1().Nodes().PatchStatus(ctx, node.Name, body); err != nil {
		return fmt.Errorf("setting %s=%s on node %s: %w", name, n, node.Name, err)
	}
	klog.InfoS("Published GPU count", "node", node.Name, "resource", name, "count", n)
	return nil
}

// keepNodeCurrent publishes node facts now, on every health change, after every
// registration (a restarted kubelet may zero extended resources) and every NodeResync.
func (p *Plugin) keepNodeCurrent(ctx context.Context) {
	tick := p.node.Clock().NewTicker(p.nodeResync())
	defer tick.Stop()
	for {
		healthChanged, registered := p.health.Changed(), p.registrations.Wait()
		var again <-chan time.Time
		if err := p.publishNode(ctx); err != nil {
			klog.ErrorS(err, "Publishing node GPU facts failed; will retry")
			again = p.node.Clock().After(publishRetry)
		}
		select {
		case <-again:
		case <-ctx.Done():
			return
		case <-healthChanged:
		case <-registered:
		case <-tick.C():
		}
	}
}
