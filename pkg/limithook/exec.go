package limithook

import (
	"context"
	"fmt"
	"io"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Hook is the hook's command with its seams.
type Hook struct {
	// Open loads the driver's NVML for the cgroup v2 hierarchy at cgroupRoot and returns
	// the setter over it and what releases it: OpenNVML in the command.
	Open func(cgroupRoot string) (s Setter, close func(), err error)
	// Now is the clock of the failure records; nil: time.Now.
	Now func() time.Time
}

// Exec is the whole hook behind its command, over the driver's NVML (Hook.Exec).
func Exec(ctx context.Context, args []string, stdin io.Reader) error {
	return Hook{Open: openSystemNVML}.Exec(ctx, args, stdin)
}

// openSystemNVML is OpenNVML of the dynamic loader's libnvidia-ml.so.1.
func openSystemNVML(cgroupRoot string) (Setter, func(), error) {
	s, closeLib, err := OpenNVML("", cgroupRoot)
	return s, closeLib, err
}

// Exec parses args (after argv[0]), reads the container state in stdin, picks the setter of
// the mode (opening NVML within the deadline) and sets the limits (apply), all within the
// hook's --deadline. On a failure it leaves a FailureRecord in --failure-dir (when set) and
// returns the failure, tagged with its reason (ReasonOf); a record that cannot be written
// is added to the error's text, never in place of it.
func (h Hook) Exec(ctx context.Context, args []string, stdin io.Reader) error {
	a, err := ParseArgs(args)
	if err != nil {
		return h.fail(a.FailureDir, "", failed(ReasonArgs, "", err))
	}
	ctx, cancel := context.WithTimeout(ctx, a.deadline())
	defer cancel()
	st, err := ReadState(stdin)
	if err != nil {
		return h.fail(a.FailureDir, "", failed(ReasonState, "", err))
	}
	return h.fail(a.FailureDir, st.ID, h.run(ctx, a, st))
}

// run sets the limits of a on the container in st with the setter of a's mode.
func (h Hook) run(ctx context.Context, a Args, st specs.State) error {
	if a.Mode == ModeSimulated {
		return apply(ctx, a, st, SimulatedSetter{CardDir: a.SimulatedCardDir})
	}
	type opened struct {
		s        Setter
		closeLib func()
	}
	lib, err := callWithin(ctx, a.deadline(), "", "NVML", "loading and initialising the library", func() (opened, error) {
		s, closeLib, err := h.Open(a.CgroupRoot)
		return opened{s, closeLib}, err
	})
	if err != nil {
		return failed(ReasonNVML, "", fmt.Errorf("container %s: %w", st.ID, err))
	}
	// Released within what is left of the deadline; past it the process's exit releases it.
	defer func() {
		_ = within(ctx, a.deadline(), "", "NVML", "nvmlShutdown", func() error { lib.closeLib(); return nil })
	}()
	return apply(ctx, a, st, lib.s)
}

// fail leaves err's FailureRecord in dir (none when dir is empty or err nil) and returns err,
// with the record's own failure added to its text.
func (h Hook) fail(dir, containerID string, err error) error {
	if err == nil || dir == "" {
		return err
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	reason, card := ReasonOf(err)
	rec := FailureRecord{Reason: reason, Card: card, ContainerID: containerID, Time: now().UTC(), Message: err.Error()}
	if _, werr := WriteFailure(dir, rec); werr != nil {
		return fmt.Errorf("%w (its failure record was not written: %v)", err, werr)
	}
	return err
}
