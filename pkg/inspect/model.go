package inspect

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// model is the occupancy of the GPU-sharing nodes: what every output form prints. Its JSON
// field names are a stable interface (documented in docs/inspect.md); add fields, never
// rename them.
type model struct {
	Nodes  []nodeUsage `json:"nodes"`
	Totals sums        `json:"totals"`
}

// sums sums every node. When the nodes use different units the sums are converted to the
// largest unit that divides all of them (GiB and MiB nodes sum in MiB).
type sums struct {
	Unit      gpushare.Unit `json:"unit"`
	Allocated int64         `json:"allocated"` // units of Unit
	Total     int64         `json:"total"`     // units of Unit
	Percent   int64         `json:"percent"`   // floor(100*Allocated/Total); 0 when Total is 0
}

// nodeUsage is one GPU-sharing node. All amounts are in the node's Unit.
type nodeUsage struct {
	Name      string        `json:"name"`
	IPAddress string        `json:"ipAddress"` // InternalIP, else the first address, else "unknown"
	Unit      gpushare.Unit `json:"unit"`
	// InventorySource is "annotation" (share-plugin's per-card inventory), "allocatable"
	// (gpu-mem / gpu-count identical cards: old device plugin or a hand-made node) or
	// "resourceslice" (the DRA back end's ResourceSlices).
	InventorySource  gpushare.InventorySource `json:"inventorySource"`
	Cards            []cardUsage              `json:"cards"`
	PendingAllocated int64                    `json:"pendingAllocated"` // bound pods without a card annotation
	Allocated        int64                    `json:"allocated"`        // sum of cards' Allocated + PendingAllocated
	Total            int64                    `json:"total"`            // sum of healthy cards' Total (an unhealthy card takes no pods)
	Percent          int64                    `json:"percent"`          // floor(100*Allocated/Total)
	Pods             []podUsage               `json:"pods"`
	// Isolation is the node's gpushare.io/isolation label: "none" (also without the label),
	// "mps", or "invalid" for any other value (a warning names it).
	Isolation string `json:"isolation"`
	// IsolationLabelled: the node carries the label (the details view then shows it).
	IsolationLabelled bool `json:"-"`
	// EnvDeviceRequests is the node's gpushare.io/env-device-requests label, share-plugin's
	// reading of its NVIDIA runtime configuration: "accepted" (a pod's own
	// NVIDIA_VISIBLE_DEVICES can widen its cards), "refused", "unknown", or "invalid" for
	// any other value (a warning names it); absent without the label.
	EnvDeviceRequests string `json:"envDeviceRequests,omitempty"`
	// UsageTime is when share-plugin's usage watchdog last listed the node's processes
	// (gpushare.io/gpu-usage); absent without that annotation. The usedMiB fields below
	// come from the same sample.
	UsageTime *time.Time `json:"usageTime,omitempty"`
	// Backend is "dra" for a node served by the DRA back end (gpushare.io/backend=dra);
	// absent for the device plugin's nodes.
	Backend string `json:"backend,omitempty"`
	// Claims are the ResourceClaims allocated memory of a DRA node's cards, by namespace and
	// name; absent on the device plugin's nodes. Each claim counts once on its cards, and
	// in the pod rows under the first pod that reserves it.
	Claims []claimUsage `json:"claims,omitempty"`
	// Warnings are problems found while reading the node and its pods (malformed
	// annotations); the numbers above are still the best reading.
	Warnings []string `json:"warnings,omitempty"`
}

// cardUsage is one GPU of a node.
type cardUsage struct {
	Index     int    `json:"index"`           // NVML index, as in ALIYUN_COM_GPU_MEM_IDX
	UUID      string `json:"uuid,omitempty"`  // empty for allocatable-derived cards
	Model     string `json:"model,omitempty"` // e.g. "Tesla T4"
	Total     int64  `json:"total"`
	Allocated int64  `json:"allocated"`
	Healthy   bool   `json:"healthy"`
	// Missing marks a card index that pods' annotations name but the node's inventory does
	// not list (stale annotation, card removed); its Total is 0.
	Missing bool `json:"missing,omitempty"`
	// UnattributedMiB is the memory processes of no GPU-sharing pod use on the card
	// (usage watchdog); absent without usage data for the card.
	UnattributedMiB *int64 `json:"unattributedMiB,omitempty"`
	// Limits is what the card's pods may allocate together at most, in units: the sum over
	// its pods of their limit there (podCard.Limit), or their Allocated for pods without one;
	// it may exceed Total. Absent when no pod of the card declares a memory limit.
	Limits int64 `json:"limits,omitempty"`
	// Compute is the compute share the card's pods hold together, in percent of the card
	// (gpushare.AnnotationComputeShare); absent when none of them has one.
	Compute int `json:"compute,omitempty"`
}

// podUsage is a pod bound to a node that holds or waits for gpu-mem on it.
type podUsage struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	Cards     []podCard `json:"cards"` // per card, app/init/sidecar containers combined
	// PendingAllocated is the pod's gpu-mem when it is bound but carries no card annotation
	// yet (counted under PENDING(Allocated)); 0 otherwise.
	PendingAllocated int64     `json:"pendingAllocated"`
	Allocated        int64     `json:"allocated"` // sum of Cards + PendingAllocated
	uid              types.UID // matches the usage annotation's pods
	// cardChoice is the pod's card annotations (gpushare.CardChoice.Annotations) joined by
	// ", ", or why they are invalid; "" without any. The details view alone shows it.
	cardChoice string
}

// claimUsage is one allocated ResourceClaim on a DRA node. Amounts are in the node's Unit.
type claimUsage struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	Pods      []string  `json:"pods"`  // the pods reserving it (status.reservedFor), of its namespace
	Cards     []podCard `json:"cards"` // consumed memory per card, by index
	Allocated int64     `json:"allocated"`
}

// podCard is what one pod holds on one card and, with usage data, what its containers use
// there. A card the pod uses but holds nothing on appears with Allocated 0.
type podCard struct {
	Index     int   `json:"index"`
	Allocated int64 `json:"allocated"`
	// UsedMiB sums the pod's containers' use on the card (usage watchdog); absent when
	// the node's usage annotation does not list the pod on the card.
	UsedMiB *int64 `json:"usedMiB,omitempty"`
	// UsedUnknown: NVML could not measure some of the processes; UsedMiB is a lower bound.
	UsedUnknown bool `json:"usedUnknown,omitempty"`
	// Limit is the most the pod may allocate on the card, in units, where its containers
	// declare memory limits above their requests (gpushare.AnnotationMemLimit): their limits
	// summed as Allocated sums their requests. Absent (0) otherwise: the limit is Allocated.
	Limit int64 `json:"limit,omitempty"`
	// Compute is the pod's compute share on the card in percent, where its containers
	// declare shares (gpushare.AnnotationComputeShare); absent (0) otherwise.
	Compute int `json:"compute,omitempty"`
}

// committed is what the pod may allocate on the card at most: Limit, or Allocated.
func (c podCard) committed() int64 { return max(c.Limit, c.Allocated) }

// maxCardColumns is one more than the highest card index on the node (0 without cards):
// the number of GPUn columns its rows need.
func (n nodeUsage) maxCardColumns() int {
	m := 0
	for _, c := range n.Cards {
		if c.Index+1 > m {
			m = c.Index + 1
		}
	}
	return m
}

// card returns the card with the given index.
func (n nodeUsage) card(index int) (cardUsage, bool) {
	for _, c := range n.Cards {
		if c.Index == index {
			return c, true
		}
	}
	return cardUsage{}, false
}

// card returns the pod's entry for card index.
func (p podUsage) card(index int) (podCard, bool) {
	for _, c := range p.Cards {
		if c.Index == index {
			return c, true
		}
	}
	return podCard{}, false
}

// limit returns the pod's limit on card index (0 when it declares none there).
func (p podUsage) limit(index int) int64 {
	c, _ := p.card(index)
	return c.Limit
}

// units returns the pod's units on card index (0 when it holds none there).
func (p podUsage) units(index int) int64 {
	for _, c := range p.Cards {
		if c.Index == index {
			return c.Allocated
		}
	}
	return 0
}

// percent is floor(100*part/whole) as the old tool printed it (12/14 → 85); 0 when whole is
// not positive.
func percent(part, whole int64) int64 {
	if whole <= 0 {
		return 0
	}
	return part * 100 / whole
}
