package limithook

import (
	"context"
	"fmt"
	"io"
)

// Setter applies one card's limit to one cgroup.
type Setter interface {
	// SetLimit gives cgroup cg (of the container with runtime ID containerID) a hard limit
	// of l on card l.UUID.
	SetLimit(ctx context.Context, containerID string, cg Cgroup, l Limit) error
	// AcceptsV1 reports whether the setter takes a cgroup v1 path (simulated cards only).
	AcceptsV1() bool
}

// Run is the hook: it reads the container state from stdin, finds the container's cgroup
// and sets every limit of a with s, stopping at the first failure (the runtime then fails
// the container, so no container runs without its limits).
func Run(ctx context.Context, a Args, stdin io.Reader, s Setter) error {
	st, err := ReadState(stdin)
	if err != nil {
		return err
	}
	cg, err := CgroupOf(a.ProcRoot, st.Pid, s.AcceptsV1())
	if err != nil {
		return fmt.Errorf("container %s: %w", st.ID, err)
	}
	for _, l := range a.Limits {
		if err := s.SetLimit(ctx, st.ID, cg, l); err != nil {
			return fmt.Errorf("container %s, cgroup %s: %w", st.ID, cg.Path, err)
		}
	}
	return nil
}
