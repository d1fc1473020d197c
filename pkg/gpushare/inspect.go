package gpushare

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// InspectPath is the extender's endpoint, on its diagnostics address, answering an
// InspectReport of every node; InspectPath + "/<node>" answers one node's.
const InspectPath = "/gpushare-scheduler/inspect"

// InspectReport is the answer of the extender's GET /gpushare-scheduler/inspect: its ledger,
// one node per entry, by name, for people (`kubectl inspect gpushare`), the consistency check
// (`--check`) and the e2e suite. Amounts are gpu-mem units of each node.
type InspectReport struct {
	Nodes []InspectNode `json:"nodes"`
}

// InspectNode is one node's accounting. It keeps the old extender's shape ({"name",
// "totalGPU", "usedGPU", "devs": [{"id", "totalGPU", "usedGPU", "pods": [{"name",
// "namespace", "usedGPU"}]}]}) and adds fields old readers ignore.
//
// On an unhealthy card, Used still counts (its pods hold that memory until they go) but
// Total does not (nothing new can be placed there): a node's Used sums every card, its Total
// the healthy ones, so Used may exceed Total while a card is down.
type InspectNode struct {
	Name  string        `json:"name"`
	Total int64         `json:"totalGPU"` // units: sum of healthy cards' Total
	Used  int64         `json:"usedGPU"`  // units: sum of every card's Used
	Cards []InspectCard `json:"devs"`     // by index
}

// InspectCard is one card. A card with Total 0 and !Healthy that still has pods is an index
// the inventory no longer lists.
type InspectCard struct {
	Index   int          `json:"id"`
	Total   int64        `json:"totalGPU"` // units: the card's size
	Used    int64        `json:"usedGPU"`  // units held by placed and reserved pods together
	UUID    string       `json:"uuid,omitempty"`
	Model   string       `json:"model,omitempty"`
	Healthy bool         `json:"healthy"`
	Pods    []InspectPod `json:"pods"` // by namespace/name; never nil
}

// InspectPod is what one pod holds on one card.
type InspectPod struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	UID       types.UID `json:"uid"`
	Units     int64     `json:"usedGPU"` // units on this card
	// Reserved: held at bind, not yet seen bound by the extender's informer.
	Reserved bool `json:"reserved"`
	// Conservative: the pod never showed a valid allocation record (placed without the
	// extender, a tampered record, or an invalid request): the extender counts its peak
	// per-card need on every card of the node, and after its grace period its total units
	// against the node's free units, on the cards with the least free first.
	Conservative bool `json:"conservative,omitempty"`
	// Charged: a Conservative pod past its grace period, counted against the node's free
	// units on the cards listing it, no longer on every card.
	Charged bool `json:"charged,omitempty"`
	// UnrecordedSince: when the extender first counted a Conservative pod without a valid
	// record (its grace period runs from then); nil for the other pods.
	UnrecordedSince *metav1.Time `json:"unrecordedSince,omitempty"`
}
