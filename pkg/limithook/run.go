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
	// SetLimit gives cgroup cg (the cgroup of the container with runtime ID containerID, or
	// of its pod when cg.Pod) a soft limit of l.Soft() and a hard limit of l.MiB on card
	// l.UUID.
	SetLimit(ctx context.Context, containerID string, cg Cgroup, l Limit) error
	// AcceptsV1 reports whether the setter takes a cgroup v1 path (simulated cards only).
	AcceptsV1() bool
	// Callee names what SetLimit waits on and the call it makes, for the message of a call
	// abandoned at the deadline: ("NVML", "nvmlDeviceSetMemoryLimits_v1").
	Callee() (who, call string)
}

// Run is the hook on an open setter: it reads the container state from stdin, finds the
// container's cgroup and its pod's (refusing a container of another pod than a.PodUID) and
// sets every limit of a, the pod's and the container's, with s, each within a.Deadline
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

// apply sets the limits of a with s on the container in st: first the pod's, on the pod's
// cgroup (PodOf), then the container's own, on its cgroup, each call abandoned when ctx ends
// (ctx carries a's deadline). It refuses, setting nothing, a container whose cgroup is under
// no pod cgroup (ReasonCgroup) or under another pod's than a.PodUID (ReasonPodMismatch).
func apply(ctx context.Context, a Args, st specs.State, s Setter) error {
	cg, err := CgroupOf(a.ProcRoot, st.Pid, s.AcceptsV1())
	if err != nil {
		return failed(ReasonCgroup, "", fmt.Errorf("container %s: %w", st.ID, err))
	}
	pod, err := PodOf(cg)
	if err != nil {
		return failed(ReasonCgroup, "", fmt.Errorf("container %s: %w", st.ID, err))
	}
	if pod.UID != a.PodUID {
		return failed(ReasonPodMismatch, "", fmt.Errorf("container %s is in pod %s (cgroup %s), but its CDI spec was written for pod %s, whose limits it carries: the spec serves pod %s only (on a node labelled gpushare.io/isolation=limit a DRA claim serves the one pod it was prepared for; give each pod its own claim)",
			st.ID, pod.UID, cg.Path, a.PodUID, a.PodUID))
	}
	// The pod's first: it is what holds the pod's containers without a grant of their own.
	if err := setAll(ctx, a, st.ID, pod.Cgroup, a.PodLimits, s); err != nil {
		return err
	}
	return setAll(ctx, a, st.ID, cg, a.Limits, s)
}

// setAll sets each of limits on cg with s, stopping at the first failure.
func setAll(ctx context.Context, a Args, containerID string, cg Cgroup, limits []Limit, s Setter) error {
	who, call := s.Callee()
	for _, l := range limits {
		err := within(ctx, a.deadline(), l.UUID, who, call, func() error { return s.SetLimit(ctx, containerID, cg, l) })
		if err != nil {
			return failed(ReasonOther, l.UUID, fmt.Errorf("container %s, cgroup %s: %w", containerID, cg.Path, err))
		}
	}
	return nil
}
