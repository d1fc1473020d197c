package gpushare

import "k8s.io/apimachinery/pkg/types"

// ServedPath is share-plugin's endpoint, on its metrics address, answering a ServedReport.
const ServedPath = "/served"

// ServedReport is the answer of share-plugin's GET /served: what the device plugin of one node
// handed out through kubelet's Allocate to the node's live pods, for checks that compare it
// with the extender's ledger (`kubectl inspect gpushare --check`). Amounts are gpu-mem units.
type ServedReport struct {
	Node       string            `json:"node"`
	Cards      []ServedCard      `json:"cards"`
	Containers []ServedContainer `json:"containers"`
}

// ServedCard is one card: its size and the units of the containers served on it, summed per
// pod by the Kubernetes effective-request rule (PodAllocation.CardUsage: a regular init
// container, which runs alone, is not added to the app containers).
type ServedCard struct {
	Index       int    `json:"index"`
	UUID        string `json:"uuid"`
	TotalUnits  int64  `json:"totalUnits"`
	ServedUnits int64  `json:"servedUnits"`
}

// ServedContainer is one served container: its cards and units per card index ({"0":4}).
type ServedContainer struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	Container string    `json:"container"` // ContainerRef.String(): app/0, init/1
	Cards     CardUnits `json:"cards"`
}
