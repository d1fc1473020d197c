package deviceplugin

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/nodecards"
	"github.com/gpushare/gpushare/pkg/policy"
)

// placementPolicy is how share-plugin chooses cards for a pod that carries no valid
// allocation: fill the fullest card that fits, so that a pod the extender never saw
// leaves the most whole cards free.
const placementPolicy = "binpack"

// cardDecision is what one container gets and what its pod then holds.
type cardDecision struct {
	cards []gpushare.Device // the container's cards, index order
	units []int64           // units on each of cards
	// alloc is the pod's whole allocation once this container is served.
	alloc gpushare.PodAllocation
	// placed is true when the plugin chose the pod's cards itself; why says why the pod's
	// own allocation was not used.
	placed bool
	why    error
}

// refusal is a container the node's cards cannot take; its message goes to kubelet (which
// fails the pod's admission with it) and into a Warning event on the pod.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

// nodeIsolation reads the node's isolation label from the API server. Allocate asks on every
// call rather than keeping a watch: it is called once per container start, a GET of one node
// is cheap next to the pod patch Allocate makes anyway, and a relabelled node then applies to
// the very next container, with nothing to go stale. labelErr: the label's value is invalid
// (gpushare.ParseIsolation's error, naming the label); err: the node could not be read.
func (p *Plugin) nodeIsolation(ctx context.Context) (iso gpushare.Isolation, labelErr, err error) {
	node, err := p.node.Client().CoreV1().Nodes().Get(ctx, p.node.Name(), metav1.GetOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("reading node %s for its %s label: %w", p.node.Name(), gpushare.LabelIsolation, err)
	}
	iso, labelErr = gpushare.NodeIsolation(node.Labels)
	return iso, labelErr, nil
}

// isolationRefusal checks candidate c's pod against the node's isolation mode iso (isoErr:
// its label is invalid) before any card is chosen: nil, or the refusal to send to kubelet
// and the pod.
func (p *Plugin) isolationRefusal(c candidate, iso gpushare.Isolation, isoErr error) *refusal {
	if isoErr != nil {
		// Fail closed: an administrator's typo must not silently run pods unisolated.
		return &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: node %s's isolation is unknown: %v",
			c.cont.Name, klog.KObj(c.pod), p.node.Name(), isoErr)}
	}
	if err := iso.Admits(c.req); err != nil {
		return &refusal{msg: fmt.Sprintf("refusing container %q of pod %s: %v", c.cont.Name, klog.KObj(c.pod), err)}
	}
	return nil
}

// decideCards chooses the cards of c's container and checks them against the ledger of the
// node's pods (view). The container's cards come from, in order: what this process already
// granted the pod, the pod's valid allocation, else a binpack placement of the whole pod on
// the room the other pods leave. Then every card of the container must have room for the
// pod's usage there (gpushare.PodAllocation.CardUsage) on top of what the other live pods
// hold. Errors: *refusal when a card lacks room or no placement fits; other errors for an
// allocation that does not resolve on this node.
func (p *Plugin) decideCards(c candidate, view nodeView) (cardDecision, error) {
	held := p.heldByOthers(view, c.pod.UID)
	granted := view.grants.granted(c.pod.UID)
	_, recorded, why := p.validAllocation(c.pod)
	var d cardDecision
	if why == nil || len(granted.For(c.cont.Ref)) > 0 {
		d.alloc = mergeAllocation(recorded, granted)
	} else {
		pl, err := p.place(c, held)
		if err != nil {
			return cardDecision{}, &refusal{msg: fmt.Sprintf("pod %s has no valid allocation (%v) and no card of node %s has room for it: %v; %s",
				klog.KObj(c.pod), why, p.node.Name(), err, p.heldString(held))}
		}
		d.alloc, d.placed, d.why = mergeAllocation(pl, granted), true, why
	}
	cards, units, err := cardsOf(c, d.alloc, p.cards)
	if err != nil {
		return cardDecision{}, err
	}
	usage := d.alloc.CardUsage(c.pod)
	var short []string
	for _, card := range cards {
		if held[card.Index]+usage[card.Index] > card.Units {
			short = append(short, fmt.Sprintf("card %d (%s, %d units) has %d units held by other pods on this node and the pod needs %d there",
				card.Index, card.UUID, card.Units, held[card.Index], usage[card.Index]))
		}
	}
	if len(short) > 0 {
		return cardDecision{}, &refusal{msg: fmt.Sprintf("refusing container %q of pod %s (%d units): %s",
			c.cont.Name, klog.KObj(c.pod), c.cont.Units, strings.Join(short, "; "))}
	}
	d.cards, d.units = cards, units
	return d, nil
}

// validAllocation returns the pod's gpu-mem request and its allocation record (its
// allocation annotations) when that holds a valid allocation for this node. Errors: the
// request does not parse, or the record is absent, unreadable, in another unit than this
// plugin's (gpushare.CheckRecordUnit) or invalid (gpushare.PodRequest.ValidateAllocationOn
// this node's cards).
func (p *Plugin) validAllocation(pod *corev1.Pod) (gpushare.PodRequest, gpushare.PodAllocation, error) {
	req, err := p.cfg.Resources.PodRequest(pod)
	if err != nil {
		return req, gpushare.PodAllocation{}, fmt.Errorf("reading the gpu-mem request: %w", err)
	}
	a, has, err := p.cfg.Resources.ReadAllocation(pod)
	switch {
	case err != nil:
		return req, gpushare.PodAllocation{}, err
	case !has:
		return req, gpushare.PodAllocation{}, fmt.Errorf("no allocation annotation")
	}
	if err := gpushare.CheckRecordUnit(pod, p.node.Unit()); err != nil {
		return req, gpushare.PodAllocation{}, err
	}
	if err := req.ValidateAllocationOn(a, p.cards.Has); err != nil {
		return req, gpushare.PodAllocation{}, err
	}
	return req, a, nil
}

// allocationOf is what a pod holds in the ledger: its valid allocation (a bound pod's
// allocation holds its cards even before kubelet admits it), overridden by what this process
// granted it. A pod with neither holds nothing: it gets cards when admitted. Nor does a pod
// whose admission Allocate refused.
func (p *Plugin) allocationOf(pod *corev1.Pod, grants snapshot) gpushare.PodAllocation {
	if grants.refused(pod.UID) {
		return gpushare.PodAllocation{}
	}
	_, base, _ := p.validAllocation(pod) // zero when invalid
	return mergeAllocation(base, grants.granted(pod.UID))
}

// heldByOthers returns, per card index, the units the pods of the view other than skip
// hold while they may hold memory (holdsMemory: terminating pods too), by
// gpushare.PodAllocation.CardUsage of each pod's allocation (allocationOf), counting granted
// pods the view does not show yet.
func (p *Plugin) heldByOthers(view nodeView, skip types.UID) gpushare.CardUnits {
	held := gpushare.CardUnits{}
	shown := map[types.UID]bool{}
	for _, pod := range view.pods {
		shown[pod.UID] = true
		if pod.UID == skip || !holdsMemory(pod, p.node.Name()) {
			continue
		}
		for c, u := range p.allocationOf(pod, view.grants).CardUsage(pod) {
			held[c] += u
		}
	}
	for uid, g := range view.grants {
		if uid == skip || shown[uid] || g.state == refused {
			continue
		}
		for c, u := range g.alloc.CardUsage(g.pod) {
			held[c] += u
		}
	}
	return held
}

// place chooses cards for every gpu-mem container of c's pod on the room held leaves, among
// the cards the pod's card choice allows, in the order of its card-policy if it names one.
func (p *Plugin) place(c candidate, held gpushare.CardUnits) (gpushare.PodAllocation, error) {
	node := policy.Node{Name: p.node.Name(), Cards: make([]policy.Card, 0, len(p.cards.List()))}
	for _, card := range p.cards.List() {
		if !c.req.Choice.Allows(card.Model, card.UUID) {
			continue
		}
		node.Cards = append(node.Cards, policy.Card{Index: card.Index, Total: card.Units, Used: held[card.Index], Healthy: p.health.Healthy(card.UUID)})
	}
	if len(node.Cards) == 0 && c.req.Choice.Restricts() {
		return gpushare.PodAllocation{}, fmt.Errorf("its card annotations allow no card of this node (it wants a card %s)", c.req.Choice.Describe())
	}
	pl, err := policy.ForChoice(p.policy, c.req.Choice).Place(node, c.req)
	if err != nil {
		return gpushare.PodAllocation{}, err
	}
	return pl.Allocation, nil
}

// heldString writes what the other pods hold on each card.
func (p *Plugin) heldString(held gpushare.CardUnits) string {
	parts := make([]string, 0, len(p.cards.List()))
	for _, c := range p.cards.List() {
		parts = append(parts, fmt.Sprintf("card %d (%s, %d units) has %d units held by other pods", c.Index, c.UUID, c.Units, held[c.Index]))
	}
	return strings.Join(parts, ", ")
}

// cardsOf resolves a container's cards from the pod's allocation alloc: the cards in index
// order with the units the container holds on each. Errors: no card for the container, a
// card this node does not have, units that do not add up to the container's request.
func cardsOf(c candidate, alloc gpushare.PodAllocation, cards nodecards.Set) ([]gpushare.Device, []int64, error) {
	cu := alloc.For(c.cont.Ref)
	if len(cu) == 0 {
		return nil, nil, fmt.Errorf("pod %s: container %q (%s) has no card in its allocation", klog.KObj(c.pod), c.cont.Name, c.cont.Ref)
	}
	var sum int64
	out := make([]gpushare.Device, 0, len(cu))
	units := make([]int64, 0, len(cu))
	for _, i := range slices.Sorted(maps.Keys(cu)) {
		card, ok := cards.ByIndex(i)
		if !ok {
			return nil, nil, fmt.Errorf("pod %s: container %q is allocated card %d but this node has no such card (cards: %s)", klog.KObj(c.pod), c.cont.Name, i, indexList(cards.List()))
		}
		sum += cu[i]
		out = append(out, card)
		units = append(units, cu[i])
	}
	if sum != c.cont.Units {
		return nil, nil, fmt.Errorf("pod %s: container %q requests %d units but its allocation holds %d", klog.KObj(c.pod), c.cont.Name, c.cont.Units, sum)
	}
	return out, units, nil
}

func indexList(cards []gpushare.Device) string {
	s := make([]string, len(cards))
	for i, c := range cards {
		s[i] = fmt.Sprint(c.Index)
	}
	return strings.Join(s, ",")
}
