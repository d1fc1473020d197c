package limithook

import (
	"context"
	"fmt"
	"io"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Setter applies one card's limit to one cgroup.
type Setter interface {
	// SetLimit gives cgroup cg (of the container with runtime ID containerID) a hard limit
	// of l on card l.UUID.
	SetLimit(ctx context.Context, containerID string, cg Cgroup, l Limit) error
	// AcceptsV1 reports whether the setter takes a cgroup v1 path (simulated cards only).
	AcceptsV1() bool
	// Callee names what SetLimit waits on and the call it makes, for the message of a call
	// abandoned at the deadline: ("NVML", "nvmlDeviceSetMemoryLimits_v1").
	Callee() (who, call string)
}

// Run is the hook on an open setter: it reads the container state from stdin, finds the
// container's cgroup and sets every limit of a with s, each within a.Deadline
// (DefaultDeadline when zero) of Run's start, stopping at the first failure (the runtime then
// fails the container, so no container runs without its limits). Errors are tagged with
// their reason (ReasonOf); a call past the deadline gives a *DeadlineError.
func Run(ctx context.Context, a Args, stdin io.Reader, s Setter) error {
	ctx, cancel := context.WithTimeout(ctx, a.deadline())
	defer cancel()
	st, err := ReadState(stdin)
	if err != nil {
		return failed(ReasonState, "", err)
	}
	return apply(ctx, a, st, s)
}

// deadline is a.Deadline, or DefaultDeadline when it is unset.
func (a Args) deadline() time.Duration {
	if a.Deadline <= 0 {
		return DefaultDeadline
	}
	return a.Deadline
}

// apply sets every limit of a with s on the cgroup of the container in st, each call
// abandoned when ctx ends (ctx carries a's deadline).
func apply(ctx context.Context, a Args, st specs.State, s Setter) error {
	cg, err := CgroupOf(a.ProcRoot, st.Pid, s.AcceptsV1())
	if err != nil {
		return failed(ReasonCgroup, "", fmt.Errorf("container %s: %w", st.ID, err))
	}
	who, call := s.Callee()
	for _, l := range a.Limits {
		err := within(ctx, a.deadline(), l.UUID, who, call, func() error { return s.SetLimit(ctx, st.ID, cg, l) })
		if err != nil {
			return failed(ReasonOther, l.UUID, fmt.Errorf("container %s, cgroup %s: %w", st.ID, cg.Path, err))
		}
	}
	return nil
}
