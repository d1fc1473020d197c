package replay

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// offlineNode is one node's free resources during an offline replay.
type offlineNode struct {
	spec   NodeSpec
	cpu    int64 // free millicores
	mem    int64 // free MiB
	pods   int   // pods placed
	policy policy.Node
}

// Offline replays pods with a policy directly, without a cluster: for each pod in order,
// the candidate nodes are those whose model the pod allows, with enough free cpu, memory
// and pod slots, where p.Place succeeds; the pod goes to the candidate with the highest
// p.Score, the lowest node index on ties, and fails when there is none. CPU-only pods are
// placed by the same rule (Place accepts them on any node with cards; the policy's Score
// of an empty placement decides) — unlike the cluster, where they bypass the extender and
// the scheduler picks among feasible nodes at random. Progress (may be nil) gets a bar.
// Errors: an invalid pod request, ctx cancelled.
func Offline(ctx context.Context, p policy.Policy, units Units, nodes []NodeSpec, pods []PodSpec, rec *Recorder, progress io.Writer) (time.Duration, error) {
	state := make([]*offlineNode, 0, len(nodes))
	for _, n := range nodes {
		on := &offlineNode{spec: n, cpu: n.MilliCPU, mem: n.MemoryMiB, policy: policy.Node{Name: n.Name}}
		per := units.CardUnits(n.Model)
		for i := 0; i < n.GPUs; i++ {
			on.policy.Cards = append(on.policy.Cards, policy.Card{Index: i, Total: per, Healthy: true})
		}
		state = append(state, on)
	}
	bar := NewProgress(progress, len(pods))
	defer bar.Done()
	start := time.Now()
	for i, pod := range pods {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return time.Since(start), err
			}
		}
		node, err := placeOffline(p, units, state, pod)
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
	perCard := units.PodUnitsPerCard(pod)
	best, bestScore := -1, int64(-1)
	var bestPlacement policy.Placement
	for i, n := range state {
		if !pod.AllowsModel(n.spec.Model) || n.cpu < pod.MilliCPU || n.mem < pod.MemoryMiB || n.pods >= NodePodCapacity {
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
		if s := p.Score(n.policy, pl); s > bestScore {
			best, bestScore, bestPlacement = i, s, pl
		}
	}
	if best < 0 {
		return "", nil
	}
	n := state[best]
	n.cpu -= pod.MilliCPU
	n.mem -= pod.MemoryMiB
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
