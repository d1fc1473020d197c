package deviceplugin

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// placementPolicy is how share-plugin chooses cards for a pod that carries no valid
// allocation: the extender's default, filling the fullest card that fits.
const placementPolicy = "binpack"

// decision is what one container gets and what its pod then holds.
type decision struct {
	cards []gpushare.Device // the container's cards, index order
	units []int64           // units on each of cards
	// claim is the pod's whole allocation once this container is served.
	claim gpushare.PodAllocation
	// placed is true when the plugin chose the pod's cards itself; why says why the pod's
	// own allocation was not used.
	placed bool
	why    error
}

// refusal is a container the node's cards cannot take; its message goes to kubelet (which
// fails the pod's admission with it) and into a Warning event on the pod.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// decide chooses the cards of m's container and checks them against the plugin's ledger of
// pods (the live pods of this node, pods). The container's cards come from, in order: what
// this process already chose for the pod, the pod's valid allocation, else a binpack
// placement of the whole pod on the room the other pods leave. Then every card of the
// container must have room for the pod's usage there (gpushare.PodAllocation.CardUsage) on
// top of what the other live pods hold. Errors: *refusal when a card lacks room or no
// placement fits; other errors for an allocation that does not resolve on this node.
func (p *Plugin) decide(m match, pods []*corev1.Pod) (decision, error) {
	held := p.heldByOthers(pods, m.pod.UID)
	rec := p.recordedClaim(m.pod.UID)
	_, alloc, why := p.validAllocation(m.pod)
	var d decision
	if why == nil || len(rec.For(m.cont.Ref)) > 0 {
		d.claim = mergeClaim(alloc, rec)
	} else {
		pl, err := p.place(m, held)
		if err != nil {
			return decision{}, &refusal{msg: fmt.Sprintf("pod %s has no valid allocation (%v) and no card of node %s has room for it: %v; %s",
				klog.KObj(m.pod), why, p.cfg.NodeName, err, p.heldString(held))}
		}
		d.claim, d.placed, d.why = mergeClaim(pl, rec), true, why
	}
	cards, units, err := cardsOf(m, d.claim, p.cards)
	if err != nil {
		return decision{}, err
	}
	usage := d.claim.CardUsage(m.pod)
	var short []string
	for _, c := range cards {
		if held[c.Index]+usage[c.Index] > c.Units {
			short = append(short, fmt.Sprintf("card %d (%s, %d units) has %d units held by other pods on this node and the pod needs %d there",
				c.Index, c.UUID, c.Units, held[c.Index], usage[c.Index]))
		}
	}
	if len(short) > 0 {
		return decision{}, &refusal{msg: fmt.Sprintf("refusing container %q of pod %s (%d units): %s",
			m.cont.Name, klog.KObj(m.pod), m.cont.Units, strings.Join(short, "; "))}
	}
	d.cards, d.units = cards, units
	return d, nil
}

// heldString writes what the other pods hold on each card.
func (p *Plugin) heldString(held gpushare.CardUnits) string {
	parts := make([]string, 0, len(p.cards.list))
	for _, c := range p.cards.list {
		parts = append(parts, fmt.Sprintf("card %d (%s, %d units) has %d units held by other pods", c.Index, c.UUID, c.Units, held[c.Index]))
	}
	return strings.Join(parts, ", ")
}

// place chooses cards for every gpu-mem container of m's pod on the room held leaves.
func (p *Plugin) place(m match, held gpushare.CardUnits) (gpushare.PodAllocation, error) {
	node := policy.Node{Name: p.cfg.NodeName, Cards: make([]policy.Card, 0, len(p.cards.list))}
	for _, c := range p.cards.list {
		node.Cards = append(node.Cards, policy.Card{Index: c.Index, Total: c.Units, Used: held[c.Index], Healthy: p.health.Healthy(c.UUID)})
	}
	pl, err := p.policy.Place(node, m.req)
	if err != nil {
		return gpushare.PodAllocation{}, err
	}
	return pl.Allocation, nil
}
