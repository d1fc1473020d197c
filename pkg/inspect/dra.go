package inspect

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// draObjects are the DRA back end's API objects inspect reads: the ResourceSlices of the
// gpushare driver and the ResourceClaims of every namespace. Both are empty when no node
// read is served by the DRA back end (nothing is listed then).
type draObjects struct {
	Slices []resourceapi.ResourceSlice
	Claims []resourceapi.ResourceClaim
}

// isDRANode reports whether the node's cards are served by the DRA back end
// (gpushare.LabelBackend=dra): its cards are its ResourceSlices' devices and its
// allocations the claims on them, not annotations.
func isDRANode(labels map[string]string) bool {
	return labels[gpushare.LabelBackend] == string(gpushare.BackendDRA)
}

// draNodes reads every node of nodes served by the DRA back end, by name; nil without any.
func draNodes(nodes []corev1.Node, objs draObjects) map[string]draNode {
	var out map[string]draNode
	for _, n := range nodes {
		if isDRANode(n.Labels) {
			if out == nil {
				out = map[string]draNode{}
			}
			out[n.Name] = readDRANode(n.Name, objs)
		}
	}
	return out
}

// draCard is one card device of a node's ResourceSlices. Units are the node's units.
type draCard struct {
	Device  string // the device name, "gpu-<index>"
	Index   int
	UUID    string
	Model   string
	Total   int64 // the memory capacity in units
	Healthy bool  // no device taint
	bytes   int64 // the memory capacity
}

// draClaim is one allocated claim on a node's cards. Units are the node's units.
type draClaim struct {
	Namespace, Name string
	UID             string
	Pods            []string           // names of the pods that reserve it (its namespace), in reservedFor order
	Cards           gpushare.CardUnits // card index → units consumed
	// Unknown names the devices of the node's pool the claim holds but no slice lists.
	Unknown []string
}

// draNode is what the DRA objects say about one node: its cards and the claims on them.
type draNode struct {
	Unit   gpushare.Unit
	Cards  []draCard  // by index
	Claims []draClaim // by namespace and name
}

// readDRANode reads node's cards from the gpushare driver's ResourceSlices of that node (the
// newest generation of each pool) and the claims allocated devices of those pools. The
// node's unit is the memory capacity's request-policy step (GiB when a slice has none);
// capacities and consumed memory are counted in whole units, rounded down. A result without
// consumed memory holds the whole card, as the plugin prepares it.
func readDRANode(node string, objs draObjects) draNode {
	pools := newestSlices(node, objs.Slices)
	n := draNode{Unit: sliceUnit(pools)}
	unit := unitMiB(n.Unit) * bytesPerMiB
	byDevice := map[string]draCard{} // pool/device → card
	for pool, slices := range pools {
		for _, s := range slices {
			for _, d := range s.Spec.Devices {
				c := cardOf(d, unit)
				byDevice[pool+"/"+d.Name] = c
				n.Cards = append(n.Cards, c)
			}
		}
	}
	sort.Slice(n.Cards, func(i, j int) bool { return n.Cards[i].Index < n.Cards[j].Index })
	for _, cl := range objs.Claims {
		if c, ok := claimOn(cl, pools, byDevice, unit); ok {
			n.Claims = append(n.Claims, c)
		}
	}
	slices.SortFunc(n.Claims, func(a, b draClaim) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return n
}

// bytesPerMiB converts a unit's MiB to the bytes DRA capacities count.
const bytesPerMiB = 1 << 20

// newestSlices are the gpushare driver's slices of node by pool name, each pool's newest
// generation only (older ones are being replaced).
func newestSlices(node string, all []resourceapi.ResourceSlice) map[string][]resourceapi.ResourceSlice {
	pools := map[string][]resourceapi.ResourceSlice{}
	for _, s := range all {
		if s.Spec.Driver != gpushare.DRADriverName || s.Spec.NodeName == nil || *s.Spec.NodeName != node {
			continue
		}
		have := pools[s.Spec.Pool.Name]
		switch {
		case len(have) == 0 || s.Spec.Pool.Generation > have[0].Spec.Pool.Generation:
			pools[s.Spec.Pool.Name] = []resourceapi.ResourceSlice{s}
		case s.Spec.Pool.Generation == have[0].Spec.Pool.Generation:
			pools[s.Spec.Pool.Name] = append(have, s)
		}
	}
	return pools
}

// sliceUnit is the node's unit: the request-policy step of the first memory capacity that
// has one, GiB when none does.
func sliceUnit(pools map[string][]resourceapi.ResourceSlice) gpushare.Unit {
	for _, pool := range slices.Sorted(maps.Keys(pools)) {
		for _, s := range pools[pool] {
			for _, d := range s.Spec.Devices {
				p := d.Capacity[gpushare.DRACapacityMemory].RequestPolicy
				if p == nil || p.ValidRange == nil || p.ValidRange.Step == nil {
					continue
				}
				if mib := p.ValidRange.Step.Value() / bytesPerMiB; mib > 0 {
					return gpushare.Unit{MiB: mib}
				}
			}
		}
	}
	return gpushare.GiB
}

// cardOf is device d as a card; unit is the node's unit in bytes.
func cardOf(d resourceapi.Device, unit int64) draCard {
	q := d.Capacity[gpushare.DRACapacityMemory].Value
	b := q.Value()
	c := draCard{Device: d.Name, Healthy: len(d.Taints) == 0, bytes: b, Total: b / unit}
	if a := d.Attributes[gpushare.DRAAttributeIndex]; a.IntValue != nil {
		c.Index = int(*a.IntValue)
	}
	if a := d.Attributes[gpushare.DRAAttributeUUID]; a.StringValue != nil {
		c.UUID = *a.StringValue
	}
	if a := d.Attributes[gpushare.DRAAttributeProductName]; a.StringValue != nil {
		c.Model = *a.StringValue
	}
	return c
}

// claimOn is what claim cl holds of the node's pools, whose cards byDevice holds by
// "pool/device"; ok is false for a claim not allocated there. unit is the node's unit in
// bytes.
func claimOn(cl resourceapi.ResourceClaim, pools map[string][]resourceapi.ResourceSlice, byDevice map[string]draCard, unit int64) (draClaim, bool) {
	if cl.Status.Allocation == nil {
		return draClaim{}, false
	}
	c := draClaim{Namespace: cl.Namespace, Name: cl.Name, UID: string(cl.UID), Cards: gpushare.CardUnits{}}
	for _, r := range cl.Status.Allocation.Devices.Results {
		if _, ours := pools[r.Pool]; r.Driver != gpushare.DRADriverName || !ours {
			continue
		}
		card, known := byDevice[r.Pool+"/"+r.Device]
		q, consumed := r.ConsumedCapacity[gpushare.DRACapacityMemory]
		switch {
		case !known:
			c.Unknown = append(c.Unknown, r.Device)
		case !consumed:
			c.Cards[card.Index] += card.Total
		default:
			c.Cards[card.Index] += q.Value() / unit
		}
	}
	if len(c.Cards) == 0 && len(c.Unknown) == 0 {
		return draClaim{}, false
	}
	for _, ref := range cl.Status.ReservedFor {
		if ref.Resource == "pods" && ref.APIGroup == "" {
			c.Pods = append(c.Pods, ref.Name)
		}
	}
	return c, true
}

// key is "namespace/name".
func (c draClaim) key() string { return c.Namespace + "/" + c.Name }

// inventoryResourceSlice is the InventorySource of a DRA node's cards.
const inventoryResourceSlice gpushare.InventorySource = "resourceslice"

// inventory is the node's cards as an inventory.
func (d draNode) inventory() gpushare.Inventory {
	inv := gpushare.Inventory{Unit: d.Unit}
	for _, c := range d.Cards {
		inv.Devices = append(inv.Devices, gpushare.Device{Index: c.Index, UUID: c.UUID, Model: c.Model, Units: c.Total, Healthy: c.Healthy})
	}
	return inv
}

// addClaims charges each claim to its cards once, lists it in n.Claims and adds its units to
// the row of the first pod that reserves it (a row is made for a pod the node's list lacks).
// A claim on a device the slices do not list is a warning.
func (n *nodeUsage) addClaims(claims []draClaim) {
	for _, c := range claims {
		u := claimUsage{Name: c.Name, Namespace: c.Namespace, Pods: append([]string{}, c.Pods...), Cards: []podCard{}}
		for _, idx := range sortedKeys(c.Cards) {
			pc := podCard{Index: idx, Allocated: c.Cards[idx]}
			u.Cards = append(u.Cards, pc)
			u.Allocated += pc.Allocated
			n.addToCard(pc)
		}
		for _, d := range c.Unknown {
			n.Warnings = append(n.Warnings, fmt.Sprintf("node %s: claim %s holds device %s, which the node's ResourceSlices do not list", n.Name, c.key(), d))
		}
		n.Claims = append(n.Claims, u)
		if len(c.Pods) > 0 {
			n.podRow(c.Namespace, c.Pods[0]).addCards(u.Cards)
		}
	}
}

// podRow returns the node's row of pod namespace/name, adding an empty one when missing.
func (n *nodeUsage) podRow(namespace, name string) *podUsage {
	for i := range n.Pods {
		if n.Pods[i].Namespace == namespace && n.Pods[i].Name == name {
			return &n.Pods[i]
		}
	}
	n.Pods = append(n.Pods, podUsage{Name: name, Namespace: namespace, Cards: []podCard{}})
	return &n.Pods[len(n.Pods)-1]
}

// addCards adds units per card to the pod's row.
func (p *podUsage) addCards(cards []podCard) {
	for _, c := range cards {
		p.Allocated += c.Allocated
		found := false
		for i := range p.Cards {
			if p.Cards[i].Index == c.Index {
				p.Cards[i].Allocated += c.Allocated
				found = true
			}
		}
		if !found {
			p.Cards = append(p.Cards, podCard{Index: c.Index, Allocated: c.Allocated})
		}
	}
	sort.Slice(p.Cards, func(i, j int) bool { return p.Cards[i].Index < p.Cards[j].Index })
}
