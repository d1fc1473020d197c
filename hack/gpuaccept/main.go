// Command gpuaccept is hack/gpu-acceptance.sh's window on the project's own code on a real
// GPU: each subcommand asks the driver through pkg/nvml, or reads what share-plugin would
// read, exactly as the product does, and prints one line. It adds no behaviour of its own;
// the script builds it (cgo) only on a machine with an NVIDIA driver.
//
//	gpuaccept driver                        the driver's version (NVML)
//	gpuaccept cards                         "<index> <UUID> <MiB> <MiB used>" per card
//	gpuaccept limit-support UUID...         would share-plugin publish isolation limit here?
//	gpuaccept limits UUID CGROUP MiB        does the driver hold a MiB hard limit for CGROUP?
//	gpuaccept attribute PID POD CONTAINER   does the usage watchdog charge PID to this container?
//	gpuaccept preflight [CONFIG]            share-plugin's verdict on the NVIDIA runtime config
//
// Exit status: 0 yes, 1 an error, 2 usage, 3 (limit-support) the library lacks the limit
// call (a driver before R615), 4 (limit-support) the call exists but share-plugin would not
// publish limit (NVMLSupport's answer), 5 (limits, attribute) a different answer than wanted.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gpushare/gpushare/pkg/cgroups"
	"github.com/gpushare/gpushare/pkg/limithook"
	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
	"github.com/gpushare/gpushare/pkg/preflight"
)

// exitError carries the exit status a subcommand wants.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }

func main() {
	err := run(os.Args[1:])
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "gpuaccept:", err)
	var e exitError
	if errors.As(err, &e) {
		os.Exit(e.code)
	}
	os.Exit(1)
}

func run(args []string) error {
	if len(args) == 0 {
		return exitError{2, errors.New("usage: gpuaccept driver|cards|limit-support|limits|attribute|kind|preflight ...")}
	}
	cmd, rest := args[0], args[1:]
	switch {
	case cmd == "driver" && len(rest) == 0:
		v, err := gpunvml.DriverVersion("")
		if err == nil {
			fmt.Println(v)
		}
		return err
	case cmd == "cards" && len(rest) == 0:
		return cards()
	case cmd == "limit-support" && len(rest) > 0:
		return limitSupport(rest)
	case cmd == "limits" && len(rest) == 3:
		return limits(rest[0], rest[1], rest[2])
	case cmd == "attribute" && len(rest) == 3:
		return attribute(rest[0], rest[1], rest[2])
	case cmd == "kind" && len(rest) == 1:
		return kind(rest[0])
	case cmd == "preflight" && len(rest) <= 1:
		path := preflight.DefaultNVIDIAConfigPath
		if len(rest) == 1 {
			path = rest[0]
		}
		return checkPreflight(path)
	}
	return exitError{2, fmt.Errorf("unknown subcommand or wrong arguments: %s", strings.Join(args, " "))}
}

// cards lists the cards as share-plugin sees them, with the memory in use on each.
func cards() error {
	c, err := gpunvml.New(gpunvml.SystemLibrary(""))
	if err != nil {
		return err
	}
	defer c.Shutdown()
	devs, err := c.Devices()
	if err != nil {
		return err
	}
	for _, d := range devs {
		used, err := c.UsedMemoryMiB(d.Index)
		if err != nil {
			return err
		}
		fmt.Println(d.Index, d.UUID, d.MemoryMiB, used)
	}
	return nil
}

// limitSupport answers as share-plugin decides whether a node enforces isolation limit: the
// library has the call (else a driver before R615: exit 3), and limithook.NVMLSupport
// (through limithook.SystemSupport) accepts the cards on the host's cgroup v2 hierarchy (else
// exit 4).
func limitSupport(uuids []string) error {
	lib, err := gpunvml.OpenMemoryLimiter(gpunvml.SystemLibrary(""))
	if err != nil {
		return err
	}
	err = lib.HasLimitCall()
	lib.Close()
	if err != nil {
		return exitError{3, err}
	}
	if err := limithook.SystemSupport("", limithook.DefaultCgroupRoot, uuids); err != nil {
		return exitError{4, err}
	}
	fmt.Printf("the driver has %s and answers for %s\n", gpunvml.LimitCall, strings.Join(uuids, ", "))
	return nil
}

// limits reads back the driver's limits of the cgroup at host path cg on card uuid and
// wants soft and hard both at mib, as gpushare-limit-hook sets them.
func limits(uuid, cg, mib string) error {
	want, err := strconv.ParseUint(mib, 10, 64)
	if err != nil {
		return exitError{2, fmt.Errorf("MiB %q: %w", mib, err)}
	}
	l, err := gpunvml.ReadMemoryLimits("", uuid, cg)
	if err != nil {
		return err
	}
	got := fmt.Sprintf("soft %d MiB, hard %d MiB, used %d MiB", l.SoftBytes>>20, l.HardBytes>>20, l.UsedBytes>>20)
	if l.HardBytes != want<<20 || l.SoftBytes != want<<20 {
		return exitError{5, fmt.Errorf("card %s, cgroup %s: the driver holds %s, want %d MiB", uuid, cg, got, want)}
	}
	fmt.Println(got)
	return nil
}

// attribute checks the usage watchdog's two steps for process pid: NVML lists it on a card
// (Client.Processes, the watchdog's listing) and its /proc/<pid>/cgroup names pod podUID and
// container ctrID (cgroups.Reader, the watchdog's mapping). NVML may list a new process a
// moment late, so the listing is asked for up to 10 s.
func attribute(pidArg, podUID, ctrID string) error {
	pid, err := strconv.ParseUint(pidArg, 10, 32)
	if err != nil {
		return exitError{2, fmt.Errorf("pid %q: %w", pidArg, err)}
	}
	where, seen, err := awaitListed(uint32(pid))
	if err != nil {
		return err
	}
	if !where.found {
		return exitError{5, fmt.Errorf("NVML lists no process %d on any card (it lists %v): are these PIDs of another PID namespace? share-plugin needs the host's (hostPID)", pid, seen)}
	}
	got, err := cgroups.Reader{ProcRoot: "/proc"}.Lookup(uint32(pid))
	if err != nil {
		return err
	}
	if got.PodUID != podUID || got.ID != ctrID {
		return exitError{5, fmt.Errorf("process %d (%s) maps to pod %q container %q, want pod %s container %s", pid, where, got.PodUID, got.ID, podUID, ctrID)}
	}
	fmt.Printf("process %d (%s) is pod %s container %.12s\n", pid, where, got.PodUID, got.ID)
	return nil
}

// kind prints how NVML lists process pid on its card, as the usage watchdog reads it on an
// MPS node (pkg/nvml's ProcessKind: "mps" for an MPS client, "direct" for a process with a
// context of its own, which the watchdog calls an escape, "server", "unknown"), asking for up
// to 10 s as NVML may list a new process late.
func kind(pidArg string) error {
	pid, err := strconv.ParseUint(pidArg, 10, 32)
	if err != nil {
		return exitError{2, fmt.Errorf("pid %q: %w", pidArg, err)}
	}
	where, _, err := awaitListed(uint32(pid))
	if err != nil {
		return err
	}
	if !where.found {
		return exitError{5, fmt.Errorf("NVML lists no process %d on any card", pid)}
	}
	fmt.Println(where.proc.Kind)
	return nil
}

// awaitListed asks NVML where it lists pid for up to 10 s (NVML may list a new process a
// moment late); it returns the listing (found false after 10 s) and the PIDs NVML listed last.
func awaitListed(pid uint32) (listing, []uint32, error) {
	c, err := gpunvml.New(gpunvml.SystemLibrary(""))
	if err != nil {
		return listing{}, nil, err
	}
	defer c.Shutdown()
	var where listing
	var seen []uint32
	for deadline := time.Now().Add(10 * time.Second); !where.found && time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if where, seen, err = findProcess(c, pid); err != nil {
			return listing{}, nil, err
		}
	}
	return where, seen, nil
}

// processLister is what attribute needs of pkg/nvml's client, with or without cgo.
type processLister interface {
	Devices() ([]gpunvml.Device, error)
	Processes(index int) ([]gpunvml.Process, error)
}

// listing is where NVML lists a process: its card and entry.
type listing struct {
	found bool
	card  int
	proc  gpunvml.Process
}

func (l listing) String() string {
	if !l.found {
		return ""
	}
	return fmt.Sprintf("card %d, %d MiB", l.card, l.proc.UsedBytes>>20)
}

// findProcess says where NVML lists pid and every PID it lists.
func findProcess(c processLister, pid uint32) (listing, []uint32, error) {
	devs, err := c.Devices()
	if err != nil {
		return listing{}, nil, err
	}
	var seen []uint32
	for _, d := range devs {
		procs, err := c.Processes(d.Index)
		if err != nil {
			return listing{}, nil, err
		}
		for _, p := range procs {
			seen = append(seen, p.PID)
			if p.PID == pid {
				return listing{found: true, card: d.Index, proc: p}, seen, nil
			}
		}
	}
	return listing{}, seen, nil
}

// checkPreflight prints share-plugin's node preflight verdict on the NVIDIA runtime's
// configuration at path, and whether it would refuse isolation limit and mps on this node.
func checkPreflight(path string) error {
	v := preflight.Check(path)
	if err := v.IsolationBlocker(); err != nil {
		fmt.Printf("env-device-requests=%s: share-plugin would refuse isolation limit/mps on this node: %s\n", v.State, v.Reason)
		return nil
	}
	fmt.Printf("env-device-requests=%s: limit/mps may be enforced: %s\n", v.State, v.Reason)
	return nil
}
