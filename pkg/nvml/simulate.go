package nvml

// Simulate opens a simulated node of the cards in spec (ParseSimSpec, e.g. "t4:2"): the
// simulator, which injects faults, and the Interface over it. Errors: a spec ParseSimSpec
// refuses.
func Simulate(node, spec string) (*Simulator, Interface, error) {
	cards, err := ParseSimSpec(spec)
	if err != nil {
		return nil, nil, err
	}
	sim, err := NewSimulator(node, cards)
	if err != nil {
		return nil, nil, err
	}
	nv, err := New(sim.Library())
	if err != nil {
		return nil, nil, err
	}
	return sim, nv, nil
}
