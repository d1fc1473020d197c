package replay

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// offlineNode is one node's free resources during an offline replay: cards and free
// cpu and memory (policy.Host) as policies see them, and the pods placed.
type offlineNode struct {
	spec   NodeSpec
	pods   int
	policy policy.Node
}

// Workload learning of WorkloadAware policies (fgd) in offline mode: the typical shapes
// covering this share of the pods seen so far, at most this many. They should match the
// extender's.
const (
	offlineShapeCoverage = 0.95
	offlineMaxShapes     = 64
)

// Offline replays pods with a policy directly, without a cluster: for each pod in order,
// the candidate nodes are those whose model the pod allows, with enough free cpu, memory
// and pod slots, where p.Place succeeds; the pod goes to the candidate with the highest
// rate (policy.Rater) or else Score, the lowest node index on ties, and fails when there is
// none. Nodes carry their free cpu and memory (policy.Node.Host) and placements the pod's
// request. A policy.WorkloadAware policy gets, before each pod, the typical shapes of the
// pods seen so far, this one included. CPU-only pods are placed by the same rule (Place
// accepts them on any node with cards) — unlike the cluster with
// deploy/scheduler/replay-config.yaml, where they bypass the extender and the scheduler
// picks among the feasible nodes at random. Progress (may be nil) gets a bar. Errors: an
// invalid pod request, ctx cancelled.
func Offline(ctx context.Context, p policy.Policy, units Units, nodes []NodeSpec, pods []PodSpec, rec *Recorder, progress io.Writer) (time.Duration, error) {
	state := make([]*offlineNode, 0, len(nodes))
	for _, n := range nodes {
		on := &offlineNode{spec: n, policy: policy.Node{Name: n.Name, Host: &policy.Host{CPUMilli: n.MilliCPU, MemoryMiB: n.MemoryMiB}}}
		per := units.CardUnits(n.Model)
		for i := 0; i < n.GPUs; i++ {
			on.policy.Cards = append(on.policy.Cards, policy.Card{Index: i, Total: per, Healthy: true})
		}
		state = append(state, on)
	}
	bar := NewProgress(progress, len(pods))
	defer bar.Done()
	wa, learns := p.(policy.WorkloadAware)
	var shapes policy.ShapeCounter
	start := time.Now()
	for i, pod := range pods {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return time.Since(start), err
			}
		}
		pol := p
		if learns {
			shapes.Add(podRequest(units, pod), policy.Host{CPUMilli: pod.MilliCPU, MemoryMiB: pod.MemoryMiB})
			pol = wa.WithWorkload(shapes.Workload(offlineShapeCoverage, offlineMaxShapes))
		}
		node, err := placeOffline(pol, units, state, pod)
		if err != nil {
			return time.Since(start), err
		}
		bar.Update(rec.Record(pod, node), rec)
	}
	return time.Since(start), nil
}

func podRequest(units Units, pod PodSpec) gpushare.PodRequest {
	if pod.NumGPU == 0 {
		return gpushare.PodRequest{}
	}
	return gpushare.PodRequest{Containers: []gpushare.ContainerRequest{{
		Ref: gpushare.ContainerRef{Index: 0}, Name: "main", Kind: gpushare.App,
		Units: units.PodUnitsPerCard(pod) * int64(pod.NumGPU), Cards: pod.NumGPU,
	}}}
}

// placeOffline chooses a node for pod, applies the placement and returns the node name
// ("" when nothing fits).
func placeOffline(p policy.Policy, units Units, state []*offlineNode, pod PodSpec) (string, error) {
	req := podRequest(units, pod)
	host := policy.Host{CPUMilli: pod.MilliCPU, MemoryMiB: pod.MemoryMiB}
	perCard := units.PodUnitsPerCard(pod)
	rater, fine := p.(policy.Rater)
	best, bestRate := -1, 0.0
	var bestPlacement policy.Placement
	for i, n := range state {
		free := n.policy.Host
		if !pod.AllowsModel(n.spec.Model) || free.CPUMilli < pod.MilliCPU || free.MemoryMiB < pod.MemoryMiB || n.pods >= NodePodCapacity {
			continue
		}
		if !enoughCards(n.policy, perCard, pod.NumGPU) {
			continue
		}
		pl, err := p.Place(n.policy, req)
		if err != nil {
			if _, fit := err.(*policy.FitError); fit {
				continue
			}
			return "", fmt.Errorf("placing pod %s on node %s: %w", pod.Name, n.spec.Name, err)
		}
		pl.Host = host
		var rate float64
		if fine {
			rate = rater.Rate(n.policy, pl)
		} else {
			rate = float64(p.Score(n.policy, pl))
		}
		if best < 0 || rate > bestRate {
			best, bestRate, bestPlacement = i, rate, pl
		}
	}
	if best < 0 {
		return "", nil
	}
	n := state[best]
	n.policy.Host.CPUMilli -= pod.MilliCPU
	n.policy.Host.MemoryMiB -= pod.MemoryMiB
	n.pods++
	for k := range n.policy.Cards {
		n.policy.Cards[k].Used += bestPlacement.Usage[n.policy.Cards[k].Index]
	}
	return n.spec.Name, nil
}

// enoughCards is a cheap pre-check: at least count cards with perCard free.
func enoughCards(n policy.Node, perCard int64, count int) bool {
	if count == 0 {
		return len(n.Cards) > 0
	}
	ok := 0
	for _, c := range n.Cards {
		if c.Free() >= perCard {
			ok++
		}
	}
	return ok >= count
}
