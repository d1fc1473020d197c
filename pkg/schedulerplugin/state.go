package schedulerplugin

import (
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

const stateKey fwk.StateKey = Name

// cycleState is what PreFilter learns of the pod for the rest of its scheduling cycle.
type cycleState struct {
	req gpushare.PodRequest // zero: the pod requests no gpu-mem
	pol policy.Policy       // the plugin's policy or the pod's card-policy, ready for this pod (policy.ForChoice, cache.ForPod)
	// held is the node where an earlier bind of the pod holds cards that may still land
	// (cache.HeldOn); "" when none.
	held string
	// dryRun holds, per node, the pods preemption's dry run (or the nominated pods) removed
	// from or added to that node (AddPod, RemovePod); nil when none. Clone copies it: each
	// node's dry run works on its own copy of the state.
	dryRun map[string]*nodeDryRun
	// dra is the pod's gpushare claims and the DRA back end's nodes, read for a pod without
	// gpu-mem whose claims ask memory by PreFilter where it narrows the nodes (narrowDRA),
	// else by PreScore; nil otherwise.
	dra *draScoring
	// draCards is the DRA back end's nodes, read by PreScore for a pod that asks no GPU
	// memory at all under a workload-aware policy, whose rates weigh every node's cards; nil
	// otherwise.
	draCards *draView
	// scores are the policy's rates of the pod on the nodes PreScore was given, in that
	// order (the order NormalizeScore lists them in); nil before PreScore.
	scores *nodeRates
	// bind is what Reserve held, for Bind and Unreserve; nil before Reserve.
	bind *reserved
	// narrowed: PreFilter restricted this cycle to the nodes the policy rates best
	// (narrowMem, narrowDRA), so PostFilter asks for a retry on every node.
	narrowed bool
}

// nodeDryRun is one node's pods removed and added by a dry run, with the gpu-mem units per
// card each frees or takes.
type nodeDryRun struct {
	removed map[types.UID]gpushare.CardUnits
	added   map[types.UID]gpushare.CardUnits
}

// delta is the change of used units per card: added minus removed.
func (d *nodeDryRun) delta() gpushare.CardUnits {
	out := gpushare.CardUnits{}
	for _, cu := range d.removed {
		for card, u := range cu {
			out[card] -= u
		}
	}
	for _, cu := range d.added {
		for card, u := range cu {
			out[card] += u
		}
	}
	return out
}

// reserved is the outcome of Reserve.
type reserved struct {
	pod *cache.Pod
	rsv cache.Reservation
	// placed: the ledger already counts the pod on this node, bound (a bind of it landed
	// meanwhile): there is nothing to hold, write or free.
	placed bool
}

// Clone implements fwk.StateData. The dry-run maps are copied; the scores are not shared
// (NormalizeScore hands them back to the pool, so a clone rates afresh unless PreScore runs
// on it); the rest is never modified after PreFilter or is only set later in the cycle, on
// the original.
func (s *cycleState) Clone() fwk.StateData {
	out := *s
	out.scores = nil
	if s.dryRun != nil {
		out.dryRun = make(map[string]*nodeDryRun, len(s.dryRun))
		for node, d := range s.dryRun {
			out.dryRun[node] = &nodeDryRun{removed: maps.Clone(d.removed), added: maps.Clone(d.added)}
		}
	}
	return &out
}

// nodeDryRun returns the node's dry-run record, creating it.
func (s *cycleState) nodeDryRun(node string) *nodeDryRun {
	if s.dryRun == nil {
		s.dryRun = map[string]*nodeDryRun{}
	}
	d, ok := s.dryRun[node]
	if !ok {
		d = &nodeDryRun{removed: map[types.UID]gpushare.CardUnits{}, added: map[types.UID]gpushare.CardUnits{}}
		s.dryRun[node] = d
	}
	return d
}

func readState(state fwk.CycleState) (*cycleState, error) {
	v, err := state.Read(stateKey)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the cycle state: %w", Name, err)
	}
	s, ok := v.(*cycleState)
	if !ok {
		return nil, fmt.Errorf("%s: cycle state holds %T", Name, v)
	}
	return s, nil
}
