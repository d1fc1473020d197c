package cache

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// nodeState is one node's cards and pods, guarded by mu.
type nodeState struct {
	mu sync.Mutex
	// topFree holds the largest free units of the node's cards, descending (nTop of them
	// valid), next to mu so the filter shortcut reads one cache line per node instead of
	// chasing the cards slice: with thousands of nodes per call, memory latency dominates.
	// The struct is 256 bytes, a size class whose objects start on a cache line: mu,
	// topFree, nTop, plain, known and name fill the first line (all the filter shortcut
	// reads), cards starts the second (what the rating paths read next).
	topFree [4]int64
	nTop    int8 // at most len(topFree)
	// plain: the node admits every request without a memory limit (known, with cards,
	// isolation none or limit and a valid label), so such a request topFree holds fits
	// without reading further. Set by recompute,
	// which every change of those fields ends with.
	plain bool
	known bool // a node object matching the selector exists
	// unitMiB is the size in MiB of the gpu-mem unit the node's inventory annotation
	// publishes (gpushare.Unit.MiB, at most 2^30: a uint32 beside nTop keeps the struct in
	// its size class); 0 when the node publishes none (the allocatable fallback, whose unit
	// nobody states).
	unitMiB uint32
	// name is the node's; the rating paths read it here rather than from the node object,
	// whose memory is seldom in cache.
	name string
	// cards is devices plus, for pods holding units on an index the inventory no longer
	// has, an unhealthy zero-size card (shown over-committed). Used sums pods' usage.
	cards []policy.Card
	// lastMiss remembers the last single-container shortfall on this node until the node
	// changes: pending pods are filtered again and again (retries, replicas of one size),
	// and building the per-card reason costs more than the fit check itself.
	lastMiss missMemo

	// isolation is the node's isolation mode (a byte: the struct keeps its size class);
	// isolationErr, when set, says its label is invalid (the node then takes no GPU pod).
	isolation    isolationCode
	isolationErr error
	// inventoryErr, when set, says the node's inventory holds a value out of range
	// (gpushare.RangeError): devices is then empty and the node takes no GPU pod.
	inventoryErr error
	devices      []gpushare.Device // from the inventory, by index
	// pods holds units here: an entry per pod placed on this node, holding the Pod the pod
	// informer stores (shared, not copied: nobody modifies it), and per reservation Reserve
	// made (Pod.reserved). The entries' counted usage gives the units per card (see decide).
	pods map[types.UID]*podEntry
	// trust holds, for the rare pod whose counted usage is not its trusted usage (its record
	// was changed after it was trusted), the trusted one (trust.go trustedOf).
	trust map[types.UID]cardUsage
	// unrecorded holds, for each entry that never showed a valid record (basisConservative,
	// basisCharged), when the cache first counted it so: its grace period runs from then
	// (grace.go). Its size is the number of such entries.
	unrecorded map[types.UID]time.Time
	// notices are events decided under mu, sent by whoever releases it (takeNotices).
	notices []notice
	// compute is what the pods take of each card's compute, by card index (tallyCompute):
	// nil unless a card holds a compute share or, on an MPS node, any grant.
	compute map[int]cardCompute
}

func newNodeState(name string) *nodeState {
	return &nodeState{name: name, pods: map[types.UID]*podEntry{}}
}

// view is the node as policy sees it. It shares n.cards: valid only while n.mu is held,
// and policy functions only read it.
func (n *nodeState) view() policy.Node {
	return policy.Node{Name: n.name, Cards: n.cards}
}

// setInventory replaces the node's cards. The devices are kept, not copied, when already
// sorted by index (the stored slim node's, which nobody modifies). Caller holds n.mu.
func (n *nodeState) setInventory(inv gpushare.Inventory, at graceClock) {
	devs := inv.Devices
	byIndex := func(a, b gpushare.Device) int { return a.Index - b.Index }
	if !slices.IsSortedFunc(devs, byIndex) {
		devs = slices.Clone(devs)
		slices.SortFunc(devs, byIndex)
	}
	n.devices = devs
	n.recompute(at)
}

// healthyUnits is the units of the node's healthy cards. Caller holds n.mu.
func (n *nodeState) healthyUnits() int64 {
	var u int64
	for _, d := range n.devices {
		if d.Healthy {
			u += d.Units
		}
	}
	return u
}

// recompute decides what each pod counts (decide; the charged ones last, against what the
// others leave free), then rebuilds cards and their Used from devices and pods. Caller
// holds n.mu.
func (n *nodeState) recompute(at graceClock) {
	n.lastMiss = missMemo{}
	used := map[int]int64{}
	var charged []chargedEntry
	for uid, e := range n.pods {
		prev := e.basis
		n.decide(e, at)
		if !e.basis.unrecorded() {
			delete(n.unrecorded, uid)
		}
		if e.basis == basisCharged {
			charged = append(charged, chargedEntry{podEntry: e, fresh: prev != basisCharged})
			continue
		}
		for _, u := range e.counted() {
			used[u.card] += u.units
		}
	}
	if len(charged) > 0 {
		n.charge(charged, used, at)
	}
	cards := make([]policy.Card, 0, len(n.devices))
	for _, d := range n.devices {
		cards = append(cards, policy.Card{Index: d.Index, Total: d.Units, Used: used[d.Index], Healthy: d.Healthy})
		delete(used, d.Index)
	}
	for idx, u := range used { // indexes held by pods that the inventory lacks
		cards = append(cards, policy.Card{Index: idx, Used: u})
	}
	sort.Slice(cards, func(i, j int) bool { return cards[i].Index < cards[j].Index })
	n.cards = cards
	n.tallyCompute()
	n.plain = n.known && len(n.devices) > 0 && n.isolationErr == nil && n.isolation.mode() != gpushare.IsolationMPS
	n.topFree, n.nTop = [4]int64{}, 0
	for _, c := range cards {
		f := c.Free()
		if int(n.nTop) < len(n.topFree) {
			n.nTop++
		} else if f <= n.topFree[n.nTop-1] {
			continue
		}
		i := n.nTop - 1 // insertion into the descending array
		for i > 0 && n.topFree[i-1] < f {
			n.topFree[i] = n.topFree[i-1]
			i--
		}
		n.topFree[i] = f
	}
}

// admits is the node-level check every placement on n starts with (Fits, Reserve,
// PlaceWith): ErrUnknownNode, *InventoryError, ErrNoCards, or *IsolationError when the node's
// isolation label refuses req or is invalid; nil when the cards decide. Caller holds n.mu.
func (n *nodeState) admits(req gpushare.PodRequest) error {
	switch {
	case !n.known:
		return ErrUnknownNode
	case n.inventoryErr != nil:
		return &InventoryError{Err: n.inventoryErr}
	case len(n.devices) == 0:
		return ErrNoCards
	case n.isolationErr != nil:
		return &IsolationError{Err: fmt.Errorf("node refuses GPU pods until its isolation label is fixed: %w", n.isolationErr)}
	}
	if err := n.isolation.mode().Admits(req); err != nil {
		return &IsolationError{Err: err}
	}
	return n.limitsFit(req)
}

// limitsFit refuses, as an *IsolationError, a container whose memory limit per card is above
// the largest card of n: the driver could never let it reach its limit there. Which card the
// container gets is placement's choice, by its request; share-plugin's Allocate refuses it
// on a smaller card. Caller holds n.mu.
func (n *nodeState) limitsFit(req gpushare.PodRequest) error {
	if !req.Limited() {
		return nil
	}
	var largest int64
	for _, d := range n.devices {
		largest = max(largest, d.Units)
	}
	for _, c := range req.Containers {
		if c.Limited() && c.LimitPerCard() > largest {
			return &IsolationError{Err: fmt.Errorf("container %q has a GPU-memory limit of %d units per card (%s), above this node's largest card (%d units)",
				c.Name, c.LimitPerCard(), gpushare.AnnotationMemLimit, largest)}
		}
	}
	return nil
}

// device returns the inventory entry of a card index.
func (n *nodeState) device(idx int) (gpushare.Device, bool) {
	i := sort.Search(len(n.devices), func(i int) bool { return n.devices[i].Index >= idx })
	if i < len(n.devices) && n.devices[i].Index == idx {
		return n.devices[i], true
	}
	return gpushare.Device{}, false
}

// isolationCode is a node's gpushare.Isolation in a byte: 0 none (or no label), 1 mps,
// 2 limit.
type isolationCode uint8

var isolationModes = [...]gpushare.Isolation{gpushare.IsolationNone, gpushare.IsolationMPS, gpushare.IsolationLimit}

// codeOfIsolation is i's code; an unknown mode (never: the label is parsed) is none.
func codeOfIsolation(i gpushare.Isolation) isolationCode {
	for c, m := range isolationModes {
		if m == i {
			return isolationCode(c)
		}
	}
	return 0
}

func (c isolationCode) mode() gpushare.Isolation { return isolationModes[c] }

// missMemo is a remembered FitError for a single-container request shape.
type missMemo struct {
	policy string
	need   int64 // units per card
	cards  int
	err    error // nil: nothing remembered
}
