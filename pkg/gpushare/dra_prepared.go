package gpushare

import "k8s.io/apimachinery/pkg/types"

// DRAPreparedPath is the DRA plugin's endpoint, on its metrics address, answering a
// DRAPreparedReport.
const DRAPreparedPath = "/prepared"

// DRAPreparedReport is the answer of the DRA plugin's GET /prepared: the claims it has
// prepared on its node (its checkpoint), for checks that compare them with the claims'
// allocations (`kubectl inspect gpushare --check`). Amounts are gpu-mem units.
type DRAPreparedReport struct {
	Node   string             `json:"node"`
	Claims []DRAPreparedClaim `json:"claims"`
}

// DRAPreparedClaim is one prepared claim: its UID, namespace and name, and the units it
// consumes per card index ({"0":4}), its results of one card added up.
type DRAPreparedClaim struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Cards     CardUnits `json:"cards"`
}
