package inspect

import (
	"cmp"
	"fmt"
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
	newest := map[string]int64{}
	for _, s := range objs.Slices {
		if s.Spec.Driver == gpushare.DRADriverName && s.Spec.NodeName != nil && *s.Spec.NodeName == node {
			if g, ok := newest[s.Spec.Pool.Name]; !ok || s.Spec.Pool.Generation > g {
				newest[s.Spec.Pool.Name] = s.Spec.Pool.Generation
			}
		}
	}
	n := draNode{Unit: gpushare.GiB}
	byDevice := map[string]draCard{} // pool/device → card
	unitFound := false
	for _, s := range objs.Slices {
		if s.Spec.Driver != gpushare.DRADriverName || s.Spec.NodeName == nil || *s.Spec.NodeName != node ||
			s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		for _, d := range s.Spec.Devices {
			mem := d.Capacity[gpushare.DRACapacityMemory]
			if p := mem.RequestPolicy; !unitFound && p != nil && p.ValidRange != nil && p.ValidRange.Step != nil {
				if mib := p.ValidRange.Step.Value() / bytesPerMiB; mib > 0 {
					n.Unit, unitFound = gpushare.Unit{MiB: mib}, true
				}
			}
			c := draCard{Device: d.Name, Healthy: len(d.Taints) == 0, bytes: mem.Value.Value()}
			if a := d.Attributes[gpushare.DRAAttributeIndex]; a.IntValue != nil {
				c.Index = int(*a.IntValue)
			}
			if a := d.Attributes[gpushare.DRAAttributeUUID]; a.StringValue != nil {
				c.UUID = *a.StringValue
			}
			if a := d.Attributes[gpushare.DRAAttributeProductName]; a.StringValue != nil {
				c.Model = *a.StringValue
			}
			byDevice[s.Spec.Pool.Name+"/"+d.Name] = c
			n.Cards = append(n.Cards, c)
		}
	}
	unit := unitMiB(n.Unit) * bytesPerMiB
	for i := range n.Cards {
		n.Cards[i].Total = n.Cards[i].bytes / unit
	}
	for k, c := range byDevice {
		c.Total = c.bytes / unit
		byDevice[k] = c
	}
	sort.Slice(n.Cards, func(i, j int) bool { return n.Cards[i].Index < n.Cards[j].Index })
	for _, cl := range objs.Claims {
		a := cl.Status.Allocation
		if a == nil {
			continue
		}
		c := draClaim{Namespace: cl.Namespace, Name: cl.Name, Cards: gpushare.CardUnits{}}
		for _, r := range a.Devices.Results {
			if _, ours := newest[r.Pool]; r.Driver != gpushare.DRADriverName || !ours {
				continue
			}
			card, ok := byDevice[r.Pool+"/"+r.Device]
			if !ok {
				c.Unknown = append(c.Unknown, r.Device)
				continue
			}
			if q, ok := r.ConsumedCapacity[gpushare.DRACapacityMemory]; ok {
				c.Cards[card.Index] += q.Value() / unit
			} else {
				c.Cards[card.Index] += card.Total
			}
		}
		if len(c.Cards) == 0 && len(c.Unknown) == 0 {
			continue
		}
		for _, ref := range cl.Status.ReservedFor {
			if ref.Resource == "pods" && ref.APIGroup == "" {
				c.Pods = append(c.Pods, ref.Name)
			}
		}
		n.Claims = append(n.Claims, c)
	}
	slices.SortFunc(n.Claims, func(a, b draClaim) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return n
}

// bytesPerMiB converts a unit's MiB to the bytes DRA capacities count.
const bytesPerMiB = 1 << 20

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
