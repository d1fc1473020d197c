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

// Limit is one card's limits for a cgroup: the container's, or its pod's.
type Limit struct {
	// UUID is the card's NVML UUID ("GPU-…").
	UUID string
	// MiB is the hard limit in MiB, the most the cgroup may allocate on the card: the
	// container's grant (units × unit MiB), or its memory limit where the pod declares one
	// (gpushare.AnnotationMemLimit); for a pod limit the same summed over the pod's
	// containers by the effective-request rule.
	MiB int64
	// SoftMiB is the soft limit in MiB, what the cgroup is guaranteed: the grant, where it
	// is below MiB; 0: the soft limit is MiB.
	SoftMiB int64
}

// Bytes is the hard limit in bytes, the unit NVML takes.
func (l Limit) Bytes() uint64 { return uint64(l.MiB) << 20 }

// Soft is the soft limit in MiB: SoftMiB, or MiB when it is unset.
func (l Limit) Soft() int64 {
	if l.SoftMiB > 0 {
		return l.SoftMiB
	}
	return l.MiB
}

// SoftBytes is the soft limit in bytes.
func (l Limit) SoftBytes() uint64 { return uint64(l.Soft()) << 20 }

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
	// Limits are the container's own limits, one per card, set on its cgroup.
	Limits []Limit
	// PodUID is the UID of the pod the CDI spec was written for: the hook refuses a container
	// whose cgroup is another pod's (PodOf), so a spec never limits, nor lets run, another
	// pod's container under limits counted for this one.
	PodUID string
	// PodLimits are the pod's limits, one per card: the sum of the grants (soft) and of the
	// memory limits (hard) of all the pod's containers on the card, set on the pod's cgroup,
	// the parent of every container's. The cgroup v2 dmem controller nests limits, so no
	// container of the pod, granted or not, can allocate beyond them. Each card of Limits has
	// one, at least as large as the container's.
	PodLimits []Limit
}

// Defaults of Args.
const (
	DefaultProcRoot   = "/proc"
	DefaultCgroupRoot = "/sys/fs/cgroup"
)

// FormatArgs is the argument list of the hook for a, argv[0] (the hook's path) first, as a
// CDI hook entry carries it: --mode=<mode> [--simulated-card-dir=<dir>] [--proc-root=<dir>]
// [--cgroup-root=<dir>] [--deadline=<duration>] [--failure-dir=<dir>] --pod-uid=<uid>
// --pod-limit=<limit>... <limit>..., each limit as Limit.String writes it; a field left
// empty, or a root at its default, is not written. The one writer of the format that
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
	if a.PodUID != "" {
		out = append(out, "--pod-uid="+a.PodUID)
	}
	for _, l := range a.PodLimits {
		out = append(out, "--pod-limit="+l.String())
	}
	// The container's limits last: the flag package stops at the first argument that is no
	// flag.
	for _, l := range a.Limits {
		out = append(out, l.String())
	}
	return out
}

// ParseArgs reads the hook's arguments after argv[0]. Errors: an unknown flag or mode, a
// simulated mode without its folder, a deadline that is not positive or over MaxDeadline,
// a failure folder that is not an absolute path, no limit, a limit or pod limit that is not
// <UUID>=<positive MiB> (soft = hard) or <UUID>=<soft MiB>:<hard MiB> with soft at most
// hard, no or an invalid --pod-uid, or pod limits that do not cover the container's
// (checkPodLimits). On an error after the flags were read, the Args returned still hold
// FailureDir, so that the failure can be recorded.
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
	fs.StringVar(&a.PodUID, "pod-uid", "", "UID of the pod the spec was written for; a container of another pod is refused")
	fs.Func("pod-limit", "<GPU UUID>=<MiB>: the pod's limit on the card, set on its cgroup (repeatable)", func(s string) error {
		l, err := parseLimit(s)
		if err != nil {
			return fmt.Errorf("pod %w", err)
		}
		a.PodLimits = append(a.PodLimits, l)
		return nil
	})
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
		l, err := parseLimit(s)
		if err != nil {
			return failure, err
		}
		a.Limits = append(a.Limits, l)
	}
	if !validPodUID(a.PodUID) {
		return failure, fmt.Errorf("--pod-uid=%q: want the UID of the pod the spec was written for (letters, digits and '-')", a.PodUID)
	}
	if err := checkPodLimits(a.Limits, a.PodLimits); err != nil {
		return failure, err
	}
	return a, nil
}

// String is l as an argument: <UUID>=<MiB> when soft and hard limit are the same, else
// <UUID>=<soft MiB>:<hard MiB>.
func (l Limit) String() string {
	if l.Soft() == l.MiB {
		return l.UUID + "=" + strconv.FormatInt(l.MiB, 10)
	}
	return l.UUID + "=" + strconv.FormatInt(l.Soft(), 10) + ":" + strconv.FormatInt(l.MiB, 10)
}

// parseLimit reads <UUID>=<MiB> (soft and hard limit) or <UUID>=<soft MiB>:<hard MiB>.
// Errors: no '=', an empty UUID or one with a '/' (it names a record file on simulated
// cards), MiB that is not a positive integer up to 2^40, or a soft limit above the hard one.
func parseLimit(s string) (Limit, error) {
	uuid, v, ok := strings.Cut(s, "=")
	softV, hardV, burst := strings.Cut(v, ":")
	if !burst {
		hardV = softV
	}
	soft, errS := parseMiB(softV)
	hard, errH := parseMiB(hardV)
	if !ok || uuid == "" || strings.ContainsRune(uuid, '/') || errS != nil || errH != nil {
		return Limit{}, fmt.Errorf("limit %q: want <GPU UUID>=<MiB> or <GPU UUID>=<soft MiB>:<hard MiB>, MiB a positive integer", s)
	}
	if soft > hard {
		return Limit{}, fmt.Errorf("limit %q: the soft limit %d MiB is above the hard limit %d MiB", s, soft, hard)
	}
	l := Limit{UUID: uuid, MiB: hard}
	if soft < hard {
		l.SoftMiB = soft
	}
	return l, nil
}

// parseMiB reads a positive integer of MiB up to 2^40.
func parseMiB(s string) (int64, error) {
	mib, err := strconv.ParseInt(s, 10, 64)
	if err != nil || mib <= 0 || mib > 1<<40 {
		return 0, fmt.Errorf("%q: want a positive integer of MiB", s)
	}
	return mib, nil
}

// checkPodLimits checks that pod names each card once, and every card of ctr with at least
// the container's soft and hard MiB: the pod's sums include the container's own, so anything
// else is a spec written wrong, and the hook refuses it rather than set limits it cannot
// explain.
func checkPodLimits(ctr, pod []Limit) error {
	if len(pod) == 0 {
		return fmt.Errorf("no --pod-limit given: the pod's cgroup is limited too, want --pod-limit=<GPU UUID>=<MiB> for each card of the container")
	}
	byCard := make(map[string]Limit, len(pod))
	for _, l := range pod {
		if _, dup := byCard[l.UUID]; dup {
			return fmt.Errorf("--pod-limit names card %s twice", l.UUID)
		}
		byCard[l.UUID] = l
	}
	for _, l := range ctr {
		p, ok := byCard[l.UUID]
		if !ok {
			return fmt.Errorf("limit %s: no --pod-limit for card %s", l, l.UUID)
		}
		if p.MiB < l.MiB || p.Soft() < l.Soft() {
			return fmt.Errorf("limit %s: the pod's limit on card %s, %s, is below the container's own", l, l.UUID, p)
		}
	}
	return nil
}

// validPodUID is true for a non-empty UID of letters, digits and '-', as Kubernetes writes
// pod UIDs (and kubelet's cgroup names carry them, '-' as '_' under systemd).
func validPodUID(uid string) bool {
	if uid == "" || len(uid) > 128 {
		return false
	}
	for _, r := range uid {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}
