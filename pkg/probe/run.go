package probe

import (
	"fmt"

	"github.com/gpushare/gpushare/pkg/gpushare"
	"github.com/gpushare/gpushare/pkg/version"
)

// Config is what the probe checks against, from the node (the verify command passes it as
// flags).
type Config struct {
	// Promise is the isolation the node's labels promise (PromiseOf).
	Promise gpushare.Isolation
	// Unit is the node's gpu-mem unit.
	Unit gpushare.Unit
	// ExpectCards is how many cards the container was granted: 0 for the sibling container.
	ExpectCards int
}

// PromiseOf is the isolation a node's labels promise: gpushare.io/isolation-enforced where
// share-plugin set it (what it can really enforce), else gpushare.io/isolation. Errors: a
// value ParseIsolation refuses.
func PromiseOf(isolation, enforced string) (gpushare.Isolation, error) {
	if enforced != "" {
		i, err := gpushare.ParseIsolation(enforced)
		if err != nil {
			return "", fmt.Errorf("%s: %w", gpushare.LabelIsolationEnforced, err)
		}
		return i, nil
	}
	return gpushare.ParseIsolation(isolation)
}

// Run checks the container: the cards it reaches, whether it runs through MPS on a node that
// promises mps, and how much memory it can allocate against its grant. open loads the
// driver; its error (ErrNoDriver) leaves the checks that need it at cannot verify. Run never
// fails: what goes wrong is in the Result.
func Run(cfg Config, s Sight, open func() (Driver, error)) Result {
	r := Result{Probe: Marker, Version: version.Version, Role: RoleSibling, Promise: cfg.Promise,
		Handover: s.Handover(), ExpectCards: cfg.ExpectCards, Sight: s, MPS: MPSUnknown, Driver: "libcuda.so.1"}
	if cfg.ExpectCards > 0 {
		r.Role = RoleGranted
	}
	d, err := open()
	if err == nil {
		defer d.Close()
		r.Devices, err = d.Devices()
	}
	if err != nil {
		r.Driver, d = err.Error(), nil
	} else {
		r.MPS = mpsOf(r.Devices)
	}
	r.Seen = append([]string{}, seenCards(s, r.Devices)...)
	r.Checks = append(r.Checks, checkCards(s, r.Devices, cfg.ExpectCards))
	if cfg.ExpectCards > 0 {
		if cfg.Promise == gpushare.IsolationMPS {
			r.Checks = append(r.Checks, checkMPS(s, r.Devices))
		}
		r.Checks = append(r.Checks, r.checkMemory(cfg, s, d))
	}
	r.Verdict = VerdictEnforced
	for _, c := range r.Checks {
		r.Verdict = r.Verdict.Worse(c.Verdict)
	}
	return r
}

// checkMemory measures every card CUDA shows (d nil: no driver). Bound: the grant and two
// units where the node promises a limit (mps, limit), the grant itself where it promises none
// (the probe does not take a shared card's memory from its neighbours to show what none
// already says). The grant counts all the container's cards together, so it bounds each.
func (r *Result) checkMemory(cfg Config, s Sight, d Driver) Check {
	switch {
	case d == nil:
		return check(CheckMemory, VerdictCannotVerify, "%s", r.Driver)
	case !s.HasGrant:
		return check(CheckMemory, VerdictCannotVerify, "no %s in the environment: grant unknown", gpushare.EnvContainerUnits)
	case len(r.Devices) == 0:
		return check(CheckMemory, VerdictCannotVerify, "CUDA shows no card")
	}
	unit := cfg.Unit.MiB
	if unit <= 0 {
		unit = gpushare.GiB.MiB
	}
	r.GrantMiB = s.GrantUnits * unit
	bound := r.GrantMiB
	if cfg.Promise != gpushare.IsolationNone {
		bound += 2 * unit
	}
	out := Check{Name: CheckMemory, Verdict: VerdictEnforced}
	for i, dev := range r.Devices {
		m := measure(d, i, dev.UUID, bound, stepFor(unit))
		r.Measurements = append(r.Measurements, m)
		c := judgeMemory(m, r.GrantMiB, unit)
		if cfg.Promise == gpushare.IsolationNone {
			c = notPromised(m, r.GrantMiB)
		}
		if out.Detail == "" || c.Verdict.rank() > out.Verdict.rank() {
			out = c
		}
	}
	return out
}

// notPromised reports a measurement on a node that promises no limit: enforced (nothing to
// hold), with how much of the grant could be allocated; cannot verify on a driver error.
func notPromised(m Measurement, grantMiB int64) Check {
	if m.Err != "" {
		return check(CheckMemory, VerdictCannotVerify, "%s: %s", m.UUID, m.Err)
	}
	return check(CheckMemory, VerdictEnforced, "%s: no limit promised (isolation %s); allocated %d MiB of grant %d MiB",
		m.UUID, gpushare.IsolationNone, m.AllocatedMiB, grantMiB)
}
