package inspect

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// The three views --check compares. The extender's (gpushare.InspectReport) and
// share-plugin's (gpushare.ServedReport) are decoded from their JSON rather than read from
// pkg/cache and pkg/deviceplugin: inspect talks to them over HTTP and must not pull in the
// extender or the plugin.

// annotatedView is what the API server's node and pod objects say: the sharing nodes' cards
// and the allocations of the non-terminated gpu-mem pods bound to them.
type annotatedView struct {
	Nodes []annotatedNode // by name
}

// annotatedNode is one sharing node. Units are the node's gpu-mem units.
type annotatedNode struct {
	Name  string
	Cards gpushare.CardUnits // inventory: card index → size
	Pods  []annotatedPod     // by namespace and name
}

// annotatedPod is one bound pod that requests gpu-mem or carries a card annotation.
type annotatedPod struct {
	Namespace, Name, UID string
	// Alloc is the parsed allocation; its zero value when the annotations do not parse.
	Alloc gpushare.PodAllocation
	// Usage is the pod's effective units per card (Kubernetes' init/app rule); nil when
	// Invalid is set, so an untrusted record never adds to a card's sum.
	Usage gpushare.CardUnits
	// Invalid says why the pod's record cannot be trusted ("" when it can).
	Invalid string
}

func (p annotatedPod) key() string { return p.Namespace + "/" + p.Name }

// buildAnnotatedView reads the sharing nodes among nodes and the non-terminated pods bound
// to them (other pods are ignored, duplicates counted once), validating each allocation
// against the pod's request and the node's inventory.
func buildAnnotatedView(nodes []corev1.Node, pods []corev1.Pod, res gpushare.Resources) annotatedView {
	byNode := boundPodsByNode(pods)
	var v annotatedView
	for i := range nodes {
		n := &nodes[i]
		if !isSharingNode(n, res) {
			continue
		}
		// A malformed inventory still yields the allocatable fallback: the best reading of
		// the card sizes, and the one the extender uses too.
		inv, _, _ := res.NodeInventory(n)
		an := annotatedNode{Name: n.Name, Cards: gpushare.CardUnits{}}
		for _, d := range inv.Devices {
			an.Cards[d.Index] = d.Units
		}
		for _, p := range byNode[n.Name] {
			if ap, ok := annotatePod(p, an.Cards, res); ok {
				an.Pods = append(an.Pods, ap)
			}
		}
		sort.Slice(an.Pods, func(i, j int) bool { return an.Pods[i].key() < an.Pods[j].key() })
		v.Nodes = append(v.Nodes, an)
	}
	sort.Slice(v.Nodes, func(i, j int) bool { return v.Nodes[i].Name < v.Nodes[j].Name })
	return v
}

// annotatePod reads and validates one bound pod; ok is false for a pod that neither
// requests gpu-mem nor carries a card annotation.
func annotatePod(p *corev1.Pod, cards gpushare.CardUnits, res gpushare.Resources) (annotatedPod, bool) {
	ap := annotatedPod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
	req, reqErr := res.PodRequest(p)
	alloc, placed, allocErr := res.ReadAllocation(p)
	switch {
	case reqErr != nil:
		ap.Invalid = fmt.Sprintf("request invalid: %v", reqErr)
		ap.Alloc = alloc
	case allocErr != nil:
		ap.Invalid = fmt.Sprintf("allocation invalid: %v", allocErr)
	case !placed && req.IsZero():
		return annotatedPod{}, false
	case !placed:
		ap.Invalid = fmt.Sprintf("requests %d units but has no allocation annotation", req.TotalUnits())
	default:
		ap.Alloc = alloc
		listed := func(i int) bool { _, ok := cards[i]; return ok }
		if err := req.ValidateAllocationOn(alloc, listed); err != nil {
			ap.Invalid = fmt.Sprintf("allocation invalid: %v", err)
		}
	}
	if ap.Invalid == "" {
		ap.Usage = alloc.CardUsage(p)
	}
	return ap, true
}

// formatCards writes card units as {card:units,...} in card order ("{0:4,1:4}", "{}").
func formatCards(cu gpushare.CardUnits) string {
	parts := make([]string, 0, len(cu))
	for _, c := range slices.Sorted(maps.Keys(cu)) {
		parts = append(parts, fmt.Sprintf("%d:%d", c, cu[c]))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
