package limithook

import (
	"context"
	"io"
)

// Exec is the whole hook behind its command: it parses args (after argv[0]), picks the
// setter of the mode and runs it on the container state in stdin.
func Exec(ctx context.Context, args []string, stdin io.Reader) error {
	a, err := ParseArgs(args)
	if err != nil {
		return err
	}
	if a.Mode == ModeSimulated {
		return Run(ctx, a, stdin, SimulatedSetter{CardDir: a.SimulatedCardDir})
	}
	s, closeLib, err := OpenNVML("", a.CgroupRoot)
	if err != nil {
		return err
	}
	defer closeLib()
	return Run(ctx, a, stdin, s)
}
