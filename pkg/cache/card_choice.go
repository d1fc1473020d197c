package cache

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/policy"
)

// maxModelsNamed bounds the product names a ChoiceError lists.
const maxModelsNamed = 4

// ChoiceError says why a node cannot take a pod whose card choice (gpushare.CardChoice)
// leaves it too few cards there: none of the node's cards is allowed (Fit nil), or the allowed
// ones have too little free. It reads e.g. "no card of type A100 with 8 free units (card2
// 4/40, card3 0/40)" or "no card of type A100 on this node (its cards: Tesla T4)".
type ChoiceError struct {
	Choice *gpushare.CardChoice
	// Fit is the shortfall on the allowed cards, which alone it lists; nil when the node has
	// no allowed card.
	Fit *policy.FitError
	// Models are the distinct product names of the node's cards (at most maxModelsNamed),
	// when Fit is nil.
	Models []string
}

func (e *ChoiceError) Error() string {
	desc := e.Choice.Describe()
	if e.Fit == nil {
		have := "its cards publish no product name"
		if len(e.Models) > 0 {
			have = "its cards: " + strings.Join(e.Models, ", ")
		}
		return "no card " + desc + " on this node (" + have + ")"
	}
	f := e.Fit
	var b strings.Builder
	if f.Container != "" {
		b.WriteString("container " + strconv.Quote(f.Container) + ": ")
	}
	units := strconv.FormatInt(f.Requested, 10) + " free units"
	if f.Cards == 1 {
		b.WriteString("no card " + desc + " with " + units)
	} else {
		b.WriteString("no " + strconv.Itoa(f.Cards) + " cards " + desc + " with " + units + " each")
	}
	b.WriteString(" (")
	for i, c := range f.Free {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("card" + strconv.Itoa(c.Index))
		if c.Unhealthy {
			b.WriteString(" unhealthy")
			continue
		}
		b.WriteString(" " + strconv.FormatInt(c.Free, 10) + "/" + strconv.FormatInt(c.Total, 10))
	}
	b.WriteString(")")
	return b.String()
}

// allowedCards is cards (the node's, or a copy) as req sees them: by its card choice, all
// of them without a restriction, else only those it allows by the product name and UUID
// the node's inventory publishes for each (a card the inventory lacks has neither), in a new
// slice; then less those compute rules out (computeCards). *ChoiceError when the choice
// allows none, *ComputeError when compute leaves none. Caller holds n.mu.
func (n *nodeState) allowedCards(cards []policy.Card, req gpushare.PodRequest) ([]policy.Card, error) {
	if req.Choice.Restricts() {
		var err error
		if cards, err = n.allowedInto(nil, cards, req.Choice); err != nil {
			return cards, err
		}
	}
	return n.computeCards(cards, req)
}

// allowedInto appends to buf the cards of cards that choice allows (see allowedCards);
// buf may be cards[:0]. Caller holds n.mu.
func (n *nodeState) allowedInto(buf, cards []policy.Card, choice *gpushare.CardChoice) ([]policy.Card, error) {
	out := buf[:0]
	for _, c := range cards {
		d, _ := n.device(c.Index)
		if choice.Allows(d.Model, d.UUID) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return out, &ChoiceError{Choice: choice, Models: n.models()}
	}
	return out, nil
}

// models lists the distinct product names of the node's cards, at most maxModelsNamed.
// Caller holds n.mu.
func (n *nodeState) models() []string {
	var out []string
	for _, d := range n.devices {
		if d.Model != "" && !slices.Contains(out, d.Model) && len(out) < maxModelsNamed {
			out = append(out, d.Model)
		}
	}
	return out
}

// placeOn is pol.Place of req on the node's cards, for a pod with a card choice on those it
// allows (placeChoosing). Caller holds n.mu.
func (n *nodeState) placeOn(req gpushare.PodRequest, pol policy.Policy) (policy.Placement, error) {
	cards, err := n.allowedCards(n.cards, req)
	if err != nil {
		return policy.Placement{}, err
	}
	return placeChoosing(policy.Node{Name: n.name, Cards: cards}, req, pol)
}

// placeChoosing is pol.Place of req on node, whose cards are those req's card choice allows:
// a shortfall there is a *ChoiceError naming the choice.
func placeChoosing(node policy.Node, req gpushare.PodRequest, pol policy.Policy) (policy.Placement, error) {
	p, err := pol.Place(node, req)
	var fit *policy.FitError
	if req.Choice.Restricts() && errors.As(err, &fit) {
		return p, &ChoiceError{Choice: req.Choice, Fit: fit}
	}
	return p, err
}
