package limithook

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Mode is how the hook applies limits.
type Mode string

const (
	// ModeNVML sets each limit through the driver's NVML (needs a cgo build).
	ModeNVML Mode = "nvml"
	// ModeSimulated records each limit beside the simulated card's file.
	ModeSimulated Mode = "simulated"
)

// Limit is one card's hard limit for the container.
type Limit struct {
	// UUID is the card's NVML UUID ("GPU-…").
	UUID string
	// MiB is the limit in MiB: the container's grant on the card (units × unit MiB).
	MiB int64
}

// Bytes is the limit in bytes, the unit NVML takes.
func (l Limit) Bytes() uint64 { return uint64(l.MiB) << 20 }

// Args are the hook's command-line arguments.
type Args struct {
	Mode Mode
	// SimulatedCardDir is the folder of the simulated cards' files (ModeSimulated only).
	SimulatedCardDir string
	// ProcRoot and CgroupRoot are where the host's /proc and cgroup v2 hierarchy are
	// (default /proc and /sys/fs/cgroup).
	ProcRoot, CgroupRoot string
	Limits               []Limit
}

// Defaults of Args.
const (
	DefaultProcRoot   = "/proc"
	DefaultCgroupRoot = "/sys/fs/cgroup"
)

// FormatArgs is the argument list of the hook for limits, argv[0] (the hook's path) first, as
// a CDI hook entry carries it: --mode=<mode> [--simulated-card-dir=<dir>] <UUID>=<MiB>...
// The one writer of the format that ParseArgs reads.
func FormatArgs(path string, mode Mode, simulatedCardDir string, limits []Limit) []string {
	out := []string{path, "--mode=" + string(mode)}
	if mode == ModeSimulated {
		out = append(out, "--simulated-card-dir="+simulatedCardDir)
	}
	for _, l := range limits {
		out = append(out, l.UUID+"="+strconv.FormatInt(l.MiB, 10))
	}
	return out
}

// ParseArgs reads the hook's arguments after argv[0]. Errors: an unknown flag or mode, a
// simulated mode without its folder, no limit, or a limit that is not <UUID>=<positive MiB>.
func ParseArgs(args []string) (Args, error) {
	a := Args{}
	fs := flag.NewFlagSet("gpushare-limit-hook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	mode := fs.String("mode", string(ModeNVML), "nvml or simulated")
	fs.StringVar(&a.SimulatedCardDir, "simulated-card-dir", "", "folder of the simulated cards' files (--mode=simulated)")
	fs.StringVar(&a.ProcRoot, "proc-root", DefaultProcRoot, "the host's /proc")
	fs.StringVar(&a.CgroupRoot, "cgroup-root", DefaultCgroupRoot, "the host's cgroup v2 hierarchy")
	if err := fs.Parse(args); err != nil {
		return Args{}, fmt.Errorf("reading the arguments: %w", err)
	}
	switch a.Mode = Mode(*mode); a.Mode {
	case ModeNVML:
	case ModeSimulated:
		if a.SimulatedCardDir == "" {
			return Args{}, fmt.Errorf("--mode=%s needs --simulated-card-dir", ModeSimulated)
		}
	default:
		return Args{}, fmt.Errorf("--mode=%q: want %s or %s", *mode, ModeNVML, ModeSimulated)
	}
	if fs.NArg() == 0 {
		return Args{}, fmt.Errorf("no limit given: want <GPU UUID>=<MiB> arguments")
	}
	for _, s := range fs.Args() {
		uuid, v, ok := strings.Cut(s, "=")
		mib, err := strconv.ParseInt(v, 10, 64)
		if !ok || uuid == "" || strings.ContainsRune(uuid, '/') || err != nil || mib <= 0 || mib > 1<<40 {
			return Args{}, fmt.Errorf("limit %q: want <GPU UUID>=<MiB>, MiB a positive integer", s)
		}
		a.Limits = append(a.Limits, Limit{UUID: uuid, MiB: mib})
	}
	return a, nil
}
