package policy

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpushare/gpushare/pkg/gpushare"
)

// constructors maps a policy name (the --policy flag value) to its constructor.
var constructors = map[string]func() Policy{
	"binpack": func() Policy { return binpack{} },
	"spread":  func() Policy { return spread{} },
	"bestfit": func() Policy { return bestfit{} },
	"fgd":     func() Policy { return newFGD(nil, Capacity{}) },
}

// Packs reports whether the named policy packs pods onto the fullest nodes it can (fgd,
// binpack), so that only the best-rated nodes are worth offering a pod.
func Packs(name string) bool { return name == "fgd" || name == "binpack" }

// Default is the policy used when none is configured: fgd, which leaves the least GPU
// unallocated on every openb trace family (docs/design/benchmarks-replay.md); binpack is the
// original gpushare's.
const Default = "fgd"

// Names lists the known policy names, sorted.
func Names() []string {
	out := make([]string, 0, len(constructors))
	for n := range constructors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// New returns the policy with the given name; an unknown name is an error listing the
// known ones.
func New(name string) (Policy, error) {
	c, ok := constructors[name]
	if !ok {
		return nil, fmt.Errorf("unknown placement policy %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return c(), nil
}

// ForChoice returns the policy a pod's card choice names for its own placement
// (gpushare.CardChoice.Policy: binpack or spread), else pol: the pod's card order and its
// score on each node follow its choice, while other pods keep the scheduler's policy.
func ForChoice(pol Policy, choice *gpushare.CardChoice) Policy {
	if choice == nil || choice.Policy == "" {
		return pol
	}
	if p, err := New(choice.Policy); err == nil {
		return p
	}
	return pol
}
