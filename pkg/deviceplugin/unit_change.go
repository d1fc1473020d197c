package deviceplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// checkUnitChange refuses to start with a unit (Config.Unit) other than the one the
// allocation records of the node's running pods count in. Their records, their requests and
// the fake devices kubelet gave them are all counts of the old unit: read in the new one, a
// 4 GiB pod would hold 4 MiB, and the node would be promised again what it runs.
//
// A record counts in the unit its gpushare.AnnotationUnit names; one without it (older
// writers) in the unit the node's inventory annotation publishes now, that is, the unit of
// the process that ran before this one. A node that publishes no inventory tells nothing,
// and its unit-less records are taken to count in Config.Unit. Pods that no longer hold
// memory (holdsMemory) do not count. The error names the pods and says to drain the node.
func (p *Plugin) checkUnitChange(ctx context.Context) error {
	published, known, err := p.publishedUnit(ctx)
	if err != nil {
		return err
	}
	pods, err := p.listPods(ctx)
	if err != nil {
		return fmt.Errorf("listing the pods of node %s to check their records' unit: %w", p.node.Name(), err)
	}
	byUnit := map[string][]string{} // unit as the record names it → pods
	for _, pod := range pods {
		if !holdsMemory(pod, p.node.Name()) {
			continue
		}
		var unit string // the unit the pod's record counts in, when not Config.Unit
		u, has, err := gpushare.RecordUnit(pod)
		switch {
		case err != nil: // unreadable: certainly not Config.Unit
			unit = strconv.Quote(clip(pod.Annotations[gpushare.AnnotationUnit]))
		case has && u.MiB != p.node.Unit().MiB:
			unit = u.String()
		case !has && known && published.MiB != p.node.Unit().MiB:
			if _, recorded, _ := p.cfg.Resources.ReadAllocation(pod); recorded {
				unit = published.String()
			}
		}
		if unit != "" {
			byUnit[unit] = append(byUnit[unit], klog.KObj(pod).String())
		}
	}
	if len(byUnit) == 0 {
		return nil
	}
	var held []string
	for _, unit := range slices.Sorted(maps.Keys(byUnit)) {
		held = append(held, fmt.Sprintf("pods %s on this node hold records in %s", strings.Join(slices.Sorted(slices.Values(byUnit[unit])), ", "), unit))
	}
	return fmt.Errorf("--memory-unit=%s but %s: drain the node first (kubectl drain %s --ignore-daemonsets), or start with the unit they were placed in",
		p.node.Unit(), strings.Join(held, "; "), p.node.Name())
}

// publishedUnit is the unit of the inventory the node publishes (an inventory without one
// counts in GiB); known is false when the node publishes no readable inventory or does not
// exist yet.
func (p *Plugin) publishedUnit(ctx context.Context) (u gpushare.Unit, known bool, err error) {
	node, err := p.node.Client().CoreV1().Nodes().Get(ctx, p.node.Name(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return gpushare.Unit{}, false, nil
	case err != nil:
		return gpushare.Unit{}, false, fmt.Errorf("reading node %s for the unit its inventory publishes: %w", p.node.Name(), err)
	}
	s, ok := node.Annotations[gpushare.AnnotationNodeInventory]
	if !ok {
		return gpushare.Unit{}, false, nil
	}
	// Only the unit matters here: an inventory whose cards are out of range still says it.
	var inv struct {
		Unit gpushare.Unit `json:"unit"`
	}
	if err := json.Unmarshal([]byte(s), &inv); err != nil {
		klog.ErrorS(err, "Node's inventory annotation is unreadable; its pods' unit-less records are taken to count in --memory-unit",
			"node", p.node.Name(), "annotation", gpushare.AnnotationNodeInventory)
		return gpushare.Unit{}, false, nil
	}
	if inv.Unit.MiB == 0 {
		inv.Unit = gpushare.GiB
	}
	return inv.Unit, true, nil
}
