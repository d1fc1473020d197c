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
	Healthy bool  // no device taint with effect NoSchedule or NoExecute (gpushare.DRADeviceHealthy)
}

// draClaim is one allocated claim on a node's cards. Units are the node's units.
type draClaim struct {
	Namespace, Name string
	UID             string
	Pods            []string           // names of the pods that reserve it (its namespace), in reservedFor order
	Cards           gpushare.CardUnits // card index → units consumed
	// Unknown names the devices of the node's pool the claim holds but no slice lists.
	Unknown []string
	// Odd says why a result's consumed memory could not be read; its card is charged whole.
	Odd []string
}

// draNode is what the DRA objects say about one node: its cards and the claims on them.
type draNode struct {
	Unit   gpushare.Unit
	Cards  []draCard  // by index
	Claims []draClaim // by namespace and name
	// Warnings name the devices the node's slices list but that cannot be read as cards.
	Warnings []string
}

// readDRANode reads node's cards from the gpushare driver's ResourceSlices of that node (the
// newest generation of each pool) and the claims allocated devices of those pools, with
// pkg/gpushare's DRA reader (as the scheduler plugin and the DRA plugin read them). The
// node's unit is the first slice's (pools by name), GiB when no slice has one. A device the
// reader refuses is no card but a warning, and claims on it charge nothing. Consumed memory
// counts in whole units; a result without it holds the whole card, as the plugin prepares
// it, and one that is not a whole number of units is charged the whole card with a warning.
func readDRANode(node string, objs draObjects) draNode {
	all := make([]*resourceapi.ResourceSlice, len(objs.Slices))
	for i := range objs.Slices {
		all[i] = &objs.Slices[i]
	}
	pools := gpushare.DRANewestPools(all, func(n string) bool { return n == node })
	n := draNode{Unit: sliceUnit(pools)}
	byDevice := map[string]*draCard{} // pool/device → card; nil: a device that is no card
	for _, pool := range slices.Sorted(maps.Keys(pools)) {
		for _, s := range pools[pool] {
			for i := range s.Spec.Devices {
				d := &s.Spec.Devices[i]
				c, err := gpushare.ReadDRACard(d)
				if err != nil {
					byDevice[pool+"/"+d.Name] = nil
					n.Warnings = append(n.Warnings, fmt.Sprintf("node %s: slice %s: %v (not counted as a card)", node, s.Name, err))
					continue
				}
				card := draCard{Device: c.Device, Index: c.Index, UUID: c.UUID, Model: c.Model, Healthy: c.Healthy, Total: c.MiB / n.Unit.MiB}
				byDevice[pool+"/"+d.Name] = &card
				n.Cards = append(n.Cards, card)
			}
		}
	}
	sort.Slice(n.Cards, func(i, j int) bool { return n.Cards[i].Index < n.Cards[j].Index })
	for _, cl := range objs.Claims {
		if c, ok := claimOn(cl, pools, byDevice, n.Unit); ok {
			n.Claims = append(n.Claims, c)
		}
	}
	slices.SortFunc(n.Claims, func(a, b draClaim) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return n
}

// sliceUnit is the node's unit: that of the first slice (pools by name) that has one, GiB
// when none does.
func sliceUnit(pools map[string][]*resourceapi.ResourceSlice) gpushare.Unit {
	for _, pool := range slices.Sorted(maps.Keys(pools)) {
		for _, s := range pools[pool] {
			if u, err := gpushare.DRASliceUnit(s); err == nil {
				return u
			}
		}
	}
	return gpushare.GiB
}

// claimOn is what claim cl holds of the node's pools, whose cards byDevice holds by
// "pool/device" (nil: a device that is no card); ok is false for a claim not allocated
// there. unit is the node's unit.
func claimOn(cl resourceapi.ResourceClaim, pools map[string][]*resourceapi.ResourceSlice, byDevice map[string]*draCard, unit gpushare.Unit) (draClaim, bool) {
	if cl.Status.Allocation == nil {
		return draClaim{}, false
	}
	c := draClaim{Namespace: cl.Namespace, Name: cl.Name, UID: string(cl.UID), Cards: gpushare.CardUnits{}}
	for i := range cl.Status.Allocation.Devices.Results {
		r := &cl.Status.Allocation.Devices.Results[i]
		if _, ours := pools[r.Pool]; r.Driver != gpushare.DRADriverName || !ours {
			continue
		}
		card, known := byDevice[r.Pool+"/"+r.Device]
		switch {
		case !known:
			c.Unknown = append(c.Unknown, r.Device)
		case card == nil: // the node's warnings name the device
		default:
			u, err := gpushare.DRAConsumedUnits(r, unit, card.Total)
			if err != nil {
				c.Odd = append(c.Odd, fmt.Sprintf("device %s: %v", r.Device, err))
				u = card.Total
			}
			c.Cards[card.Index] += u
		}
	}
	if len(c.Cards) == 0 && len(c.Unknown) == 0 && len(c.Odd) == 0 {
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
		for _, why := range c.Odd {
			n.Warnings = append(n.Warnings, fmt.Sprintf("node %s: claim %s: %s (charged the whole card)", n.Name, c.key(), why))
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
