package policy

import "github.com/gpushare/gpushare/pkg/gpushare"

// Card is one card as placement sees it.
type Card struct {
	Index   int   // NVML index, as in the pod annotations
	Total   int64 // units
	Used    int64 // units held by placed or reserved pods
	Healthy bool  // unhealthy cards take no new pods
}

// Free is the units a new pod may take: 0 for an unhealthy or over-full card.
func (c Card) Free() int64 {
	if !c.Healthy || c.Used >= c.Total {
		return 0
	}
	return c.Total - c.Used
}

// Host is CPU and memory: a node's free amount (allocatable minus the requests of the pods
// bound to it, as the scheduler counts them) or a pod's request.
type Host struct {
	CPUMilli  int64 // millicores
	MemoryMiB int64 // MiB
}

// Node is one node's cards, in index order (each NVML index once), and optionally its free
// host resources.
type Node struct {
	Name  string
	Cards []Card
	// Host is the node's free CPU and memory; nil when the caller does not account them
	// (fragmentation then looks at the cards alone).
	Host *Host
	// Unmet is the set of Constraints the node does not meet (nil: it meets every one), for
	// fgd: a typical pod whose constraint the node fails can use none of its free units.
	// Nodes may share one set; a caller replaces a node's set rather than modify it while a
	// Scorer may hold it.
	Unmet ConstraintSet
}

// Placement is the card choice for one pod on one node.
type Placement struct {
	// Allocation is each container's cards, as written to the pod annotations.
	Allocation gpushare.PodAllocation
	// Usage is what the pod holds on each card (gpushare.PodAllocation.CardUsage).
	Usage gpushare.CardUnits
	// Host is the pod's CPU and memory request. Place leaves it zero; callers that account
	// host resources set it before scoring, so a score can see what the pod takes from the
	// node.
	Host Host
}

// Policy chooses cards and scores placements. Implementations are stateless values.
type Policy interface {
	// Name is the flag value that selects the policy.
	Name() string
	// Place chooses cards for every container of req on node, or returns a *FitError.
	Place(node Node, req gpushare.PodRequest) (Placement, error)
	// Score scores placing p on node on a continuous scale, higher is better; only the
	// order of one pod's scores on several nodes means anything (NormalizeScores turns them
	// into 0..MaxScore).
	Score(node Node, p Placement) float64
}

// MaxScore is the top of NormalizeScores' 0..MaxScore. It equals
// extenderv1.MaxExtenderPriority (kept here so this package stays free of scheduler imports;
// a test checks they agree); the framework plugin multiplies it up to the framework's 0-100.
const MaxScore int64 = 10

const maxScore = MaxScore
