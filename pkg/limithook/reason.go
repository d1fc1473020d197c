package limithook

import (
	"errors"

	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// Reasons of a hook failure, in its failure record and in share-plugin's
// gpushare_limit_hook_failures_total: a fixed set, so the label stays bounded whatever the
// error text.
const (
	ReasonDeadline    = "deadline"     // an NVML call did not answer within the hook's deadline
	ReasonUnsupported = "unsupported"  // the driver, library, card or build cannot limit memory per cgroup
	ReasonCgroup      = "cgroup"       // the container's cgroup could not be found or opened, or is under no pod cgroup
	ReasonPodMismatch = "pod_mismatch" // the container is another pod's than the one its CDI spec was written for
	ReasonNVML        = "nvml"         // NVML failed otherwise (initialising, finding a card, setting a limit)
	ReasonState       = "state"        // the container state on stdin could not be read
	ReasonArgs        = "args"         // the hook's arguments could not be read
	ReasonOther       = "other"
)

// Reasons is every reason a hook failure may have, in a new slice.
func Reasons() []string {
	return []string{ReasonDeadline, ReasonUnsupported, ReasonCgroup, ReasonPodMismatch, ReasonNVML, ReasonState, ReasonArgs, ReasonOther}
}

// reasonError is a hook failure tagged, where it arises, with its reason and, where there
// is one, its card; errors wrap it, so both survive added context.
type reasonError struct {
	reason, card string
	err          error
}

func (e *reasonError) Error() string { return e.err.Error() }
func (e *reasonError) Unwrap() error { return e.err }

// failed tags err with reason and card ("" for none); nil, and an error tagged already
// (where it arose, which knows best), stay as they are.
func failed(reason, card string, err error) error {
	if _, tagged := errors.AsType[*reasonError](err); err == nil || tagged {
		return err
	}
	return &reasonError{reason: reason, card: card, err: err}
}

// ReasonOf is the reason of a hook failure: ReasonDeadline for an abandoned call, else the
// tag failed gave err where it arose, else ReasonUnsupported or ReasonCgroup for pkg/nvml's
// errors of that meaning, else ReasonOther. card is the card's UUID where the failure names
// one, else "".
func ReasonOf(err error) (reason, card string) {
	if d, ok := errors.AsType[*DeadlineError](err); ok {
		return ReasonDeadline, d.Card
	}
	if r, ok := errors.AsType[*reasonError](err); ok {
		return r.reason, r.card
	}
	switch {
	case errors.Is(err, gpunvml.ErrLimitsUnsupported):
		return ReasonUnsupported, ""
	case errors.Is(err, gpunvml.ErrCgroupNotOpened):
		return ReasonCgroup, ""
	}
	return ReasonOther, ""
}
