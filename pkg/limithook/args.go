package limithook

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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
	// Deadline bounds every NVML call of the hook (DefaultDeadline; at most MaxDeadline): a
	// call that has not returned by then is abandoned and the hook fails.
	Deadline time.Duration
	// FailureDir is where the hook leaves a FailureRecord when it fails; empty: nowhere.
	FailureDir string
	Limits     []Limit
}

// Defaults of Args.
const (
	DefaultProcRoot   = "/proc"
	DefaultCgroupRoot = "/sys/fs/cgroup"
)

// FormatArgs is the argument list of the hook for a, argv[0] (the hook's path) first, as a
// CDI hook entry carries it: --mode=<mode> [--simulated-card-dir=<dir>] [--proc-root=<dir>]
// [--cgroup-root=<dir>] [--deadline=<duration>] [--failure-dir=<dir>] <UUID>=<MiB>...; a
// field left empty, or a root at its default, is not written. The one writer of the format that
// ParseArgs reads.
func FormatArgs(path string, a Args) []string {
	out := []string{path, "--mode=" + string(a.Mode)}
	if a.Mode == ModeSimulated {
		out = append(out, "--simulated-card-dir="+a.SimulatedCardDir)
	}
	if a.ProcRoot != "" && a.ProcRoot != DefaultProcRoot {
		out = append(out, "--proc-root="+a.ProcRoot)
	}
	if a.CgroupRoot != "" && a.CgroupRoot != DefaultCgroupRoot {
		out = append(out, "--cgroup-root="+a.CgroupRoot)
	}
	if a.Deadline != 0 {
		out = append(out, "--deadline="+a.Deadline.String())
	}
	if a.FailureDir != "" {
		out = append(out, "--failure-dir="+a.FailureDir)
	}
	for _, l := range a.Limits {
		out = append(out, l.UUID+"="+strconv.FormatInt(l.MiB, 10))
	}
	return out
}

// ParseArgs reads the hook's arguments after argv[0]. Errors: an unknown flag or mode, a
// simulated mode without its folder, a deadline that is not positive or over MaxDeadline,
// a failure folder that is not an absolute path, no limit, or a limit that is not
// <UUID>=<positive MiB>. On an error after the flags were read, the Args returned still
// hold FailureDir, so that the failure can be recorded.
func ParseArgs(args []string) (Args, error) {
	a := Args{}
	fs := flag.NewFlagSet("gpushare-limit-hook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	mode := fs.String("mode", string(ModeNVML), "nvml or simulated")
	fs.StringVar(&a.SimulatedCardDir, "simulated-card-dir", "", "folder of the simulated cards' files (--mode=simulated)")
	fs.StringVar(&a.ProcRoot, "proc-root", DefaultProcRoot, "the host's /proc")
	fs.StringVar(&a.CgroupRoot, "cgroup-root", DefaultCgroupRoot, "the host's cgroup v2 hierarchy")
	fs.DurationVar(&a.Deadline, "deadline", DefaultDeadline, "bound on every NVML call; the hook fails when one has not returned by then")
	fs.StringVar(&a.FailureDir, "failure-dir", "", "folder where the hook leaves a failure record for share-plugin's metrics; empty: none")
	if err := fs.Parse(args); err != nil {
		return Args{}, fmt.Errorf("reading the arguments: %w", err)
	}
	failure := Args{FailureDir: a.FailureDir}
	if a.FailureDir != "" && !filepath.IsAbs(a.FailureDir) {
		return Args{}, fmt.Errorf("--failure-dir=%q: want an absolute path", a.FailureDir)
	}
	if a.Deadline <= 0 || a.Deadline > MaxDeadline {
		return failure, fmt.Errorf("--deadline=%s: want a positive duration of at most %s", a.Deadline, MaxDeadline)
	}
	switch a.Mode = Mode(*mode); a.Mode {
	case ModeNVML:
	case ModeSimulated:
		if a.SimulatedCardDir == "" {
			return failure, fmt.Errorf("--mode=%s needs --simulated-card-dir", ModeSimulated)
		}
	default:
		return failure, fmt.Errorf("--mode=%q: want %s or %s", *mode, ModeNVML, ModeSimulated)
	}
	if fs.NArg() == 0 {
		return failure, fmt.Errorf("no limit given: want <GPU UUID>=<MiB> arguments")
	}
	for _, s := range fs.Args() {
		uuid, v, ok := strings.Cut(s, "=")
		mib, err := strconv.ParseInt(v, 10, 64)
		if !ok || uuid == "" || strings.ContainsRune(uuid, '/') || err != nil || mib <= 0 || mib > 1<<40 {
			return failure, fmt.Errorf("limit %q: want <GPU UUID>=<MiB>, MiB a positive integer", s)
		}
		a.Limits = append(a.Limits, Limit{UUID: uuid, MiB: mib})
	}
	return a, nil
}
