package probe

import "fmt"

// Verdict is the outcome of a check, and of the probe: the worst of its checks.
type Verdict string

const (
	// VerdictEnforced: the container holds to what the node promises.
	VerdictEnforced Verdict = "enforced"
	// VerdictNotEnforced: the container reaches more than it was granted, or runs outside
	// the isolation the node promises.
	VerdictNotEnforced Verdict = "NOT enforced"
	// VerdictCannotVerify: the probe could not tell (no CUDA driver: simulated cards, or an
	// image without libcuda.so.1; a card full of other tenants' memory; a driver error).
	VerdictCannotVerify Verdict = "cannot verify"
)

// rank orders verdicts from best to worst; an unknown verdict is worst.
func (v Verdict) rank() int {
	switch v {
	case VerdictEnforced:
		return 0
	case VerdictCannotVerify:
		return 1
	}
	return 2
}

// Worse is the worse of v and w: NOT enforced, then cannot verify, then enforced.
func (v Verdict) Worse(w Verdict) Verdict {
	if w.rank() > v.rank() {
		return w
	}
	return v
}

// ExitCode is the probe's exit status for v: 0 enforced, 1 NOT enforced, 2 cannot verify.
func (v Verdict) ExitCode() int {
	switch v {
	case VerdictEnforced:
		return 0
	case VerdictCannotVerify:
		return 2
	}
	return 1
}

// Check is one rule's outcome, with the facts behind it in a line.
type Check struct {
	Name    string  `json:"name"`
	Verdict Verdict `json:"verdict"`
	Detail  string  `json:"detail"`
}

// The checks' names.
const (
	CheckCards  = "cards"
	CheckMPS    = "mps"
	CheckMemory = "memory"
)

func check(name string, v Verdict, format string, args ...any) Check {
	return Check{Name: name, Verdict: v, Detail: fmt.Sprintf(format, args...)}
}
