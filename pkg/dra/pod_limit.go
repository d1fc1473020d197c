package dra

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
)

// The pod-level limit on a limit node. A claim's spec holds each consuming container to the
// claim's memory per card, and the pod the claim was prepared for to what all the claims
// prepared for that pod hold per card (podGrant): a pod's containers that share a claim, or
// get device handles from a sibling, together take no more than the pod's claims.
//
// Prepare sees one claim at a time, so the rule is: a claim's spec carries the sum over the
// claims prepared for the same pod (PreparedClaim.PodUID) including itself, and preparing a
// pod's later claim rewrites the specs of its earlier ones with the larger sum
// (rewritePodSpecs). kubelet prepares every claim of a pod before it starts any of the pod's
// containers, and the runtime reads a container's CDI spec when it creates the container, so
// every container's hook, whenever it runs, sets the pod's full sum. A spec rewritten only in
// part (a failure half-way) carries a smaller sum: that can only refuse memory, never grant
// more than the pod's prepared claims, since the larger sum is written only once the claim
// that makes it is checkpointed. kubelet unprepares a pod's claims once none of its
// containers runs, so the sum never needs to shrink under a running container.

// consumerPod is the UID of the claim's first consumer that is a pod; "" for none.
func consumerPod(claim *resourceapi.ResourceClaim) types.UID {
	for _, r := range claim.Status.ReservedFor {
		if r.APIGroup == "" && r.Resource == "pods" && r.UID != "" {
			return r.UID
		}
	}
	return ""
}

// podOf is the pod a claim is prepared for on a limit node: its one consumer, which must be a
// pod (onePod refuses more than one). Errors: no consumer is a pod (reasonNoPod): the hook
// could hold no pod to the claim, so the claim does not prepare.
func podOf(claim *resourceapi.ResourceClaim) (types.UID, error) {
	uid := consumerPod(claim)
	if uid == "" {
		return "", failed(reasonNoPod, fmt.Errorf("it is reserved for no pod (reservedFor: %d consumers), and on a node labelled %s=%s a claim's spec limits and serves the one pod it is prepared for",
			len(claim.Status.ReservedFor), gpushare.LabelIsolation, gpushare.IsolationLimit))
	}
	return uid, nil
}

// podGrant is what the claims prepared for pod hold on each card, with devices, a claim of
// the pod not yet recorded, added: the pod-level limit of the pod's specs. Cards in index
// order. An empty pod gives an empty grant. Called with d.mu held.
func (d *Driver) podGrant(pod types.UID, devices []PreparedDevice) nodecards.PodGrant {
	g := nodecards.PodGrant{UID: pod}
	if pod == "" {
		return g
	}
	units := map[int]int64{}
	for _, p := range d.prepared {
		if p.PodUID != pod {
			continue
		}
		for _, dev := range p.Devices {
			units[dev.CardIndex] += dev.Units
		}
	}
	for _, dev := range devices {
		units[dev.CardIndex] += dev.Units
	}
	for _, idx := range slices.Sorted(maps.Keys(units)) {
		g.Cards = append(g.Cards, d.cards[DeviceName(idx)])
		g.Units = append(g.Units, units[idx])
	}
	return g
}

// rewritePodSpecs rewrites the specs of the limit claims prepared for pod, except the claim
// except, with the pod's grant now: they then carry the sum over all its claims. Errors: a
// spec that could not be written (the others are still tried). Called with d.mu held.
func (d *Driver) rewritePodSpecs(pod, except types.UID) error {
	if pod == "" {
		return nil
	}
	grant := d.podGrant(pod, nil)
	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(d.prepared)) {
		p := d.prepared[uid]
		if uid == except || p.PodUID != pod || !p.Limit {
			continue
		}
		if _, err := d.writeSpec(uid, p.Devices, p.Limit, p.RuntimeCDIDevices, grant); err != nil {
			errs = append(errs, fmt.Errorf("rewriting the spec of claim %s/%s, also prepared for pod %s: %w", p.Namespace, p.Name, pod, err))
		}
	}
	return errors.Join(errs...)
}
