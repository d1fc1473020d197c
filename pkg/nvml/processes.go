package nvml

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"sigs.k8s.io/yaml"
)

// mergeProcesses joins NVML's compute, graphics and MPS lists into one entry per PID, in PID
// order. A process in several lists (nvidia-smi's type "C+G", "M+C") holds one set of
// allocations that NVML reports in each list, so the entries are not added: the larger known
// figure wins. A process in the MPS list is an MPS client whatever the other lists say.
func mergeProcesses(lists ...[]Process) []Process {
	byPID := map[uint32]Process{}
	for _, l := range lists {
		for _, p := range l {
			q, seen := byPID[p.PID]
			if !seen {
				byPID[p.PID] = p
				continue
			}
			if p.UsedKnown && (!q.UsedKnown || p.UsedBytes > q.UsedBytes) {
				q.UsedBytes, q.UsedKnown = p.UsedBytes, true
			}
			if p.Kind == ProcessMPSClient {
				q.Kind = ProcessMPSClient
			}
			byPID[p.PID] = q
		}
	}
	out := make([]Process, 0, len(byPID))
	for _, p := range byPID {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Process) int { return int(int64(a.PID) - int64(b.PID)) })
	return out
}

// Bounds of the simulated processes file: an admin writes it, but a runaway script must not
// make every watchdog interval parse megabytes.
const (
	maxSimProcessesBytes = 1 << 20
	maxSimProcesses      = 4096
	maxSimUsedMiB        = 1 << 30 // 1 PiB
)

// SimProcess is one entry of the simulated processes file (--simulate-processes-file):
//
//   - card: 0          # the card's NVML index, or its UUID ("GPU-…")
//     pid: 4242        # a host PID; the watchdog maps it to a pod through /proc/<pid>/cgroup
//     usedMiB: 5120    # omitted: NVML "not available"
//     type: mps        # direct (omitted), mps or server
//     smUtil: 40       # optional: its SM utilisation in percent, 0..100
//
// The type is how the process reaches the card (ProcessKind): "direct" (the default, what
// every process on a card without MPS is) lists it as a compute process of its own, "mps"
// also among the card's MPS clients, "server" as a compute process named MPSServerName. The
// simulated card reports the smUtil of each entry that sets it as NVML's per-process
// utilisation, whatever its type (write the MPS server's alone to mimic an MPS card), and
// no utilisation sample for the others.
type SimProcess struct {
	Card    SimCardRef `json:"card"`
	PID     uint32     `json:"pid"`
	UsedMiB *int64     `json:"usedMiB,omitempty"`
	Type    string     `json:"type,omitempty"`
	SMUtil  *uint32    `json:"smUtil,omitempty"`
}

// simKinds are the SimProcess types and the kinds they stand for.
var simKinds = map[string]ProcessKind{"": ProcessDirect, "direct": ProcessDirect, "mps": ProcessMPSClient, "server": ProcessMPSServer}

// Kind is the ProcessKind of the entry's type (ProcessKindUnknown for a type
// ParseSimProcesses refuses).
func (p SimProcess) Kind() ProcessKind { return simKinds[p.Type] }

// SimCardRef names a simulated card by index (a YAML number) or UUID (a string).
type SimCardRef struct {
	Index int    // -1 when UUID names the card
	UUID  string // empty when Index names the card
}

// UnmarshalJSON accepts a non-negative integer or a non-empty string.
func (r *SimCardRef) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil || s == "" {
			return fmt.Errorf("card %s: want a card index or UUID", b)
		}
		*r = SimCardRef{Index: -1, UUID: s}
		return nil
	}
	i, err := strconv.Atoi(string(b))
	if err != nil || i < 0 {
		return fmt.Errorf("card %s: want a card index or UUID", b)
	}
	*r = SimCardRef{Index: i}
	return nil
}

// ParseSimProcesses decodes and checks the simulated processes file against the node's
// cards: every entry names one of them, has a positive PID, 0 <= usedMiB <= 1 PiB, a
// type of direct, mps or server (or none) and 0 <= smUtil <= 100.
func ParseSimProcesses(b []byte, devices []Device) ([]SimProcess, error) {
	if len(b) > maxSimProcessesBytes {
		return nil, fmt.Errorf("%d bytes, at most %d", len(b), maxSimProcessesBytes)
	}
	var list []SimProcess
	if err := yaml.UnmarshalStrict(b, &list); err != nil {
		return nil, err
	}
	if len(list) > maxSimProcesses {
		return nil, fmt.Errorf("%d processes, at most %d", len(list), maxSimProcesses)
	}
	for i, p := range list {
		switch {
		case simCardIndex(p.Card, devices) < 0:
			return nil, fmt.Errorf("entry %d: no card %s on this node", i, p.Card)
		case p.PID == 0:
			return nil, fmt.Errorf("entry %d: pid must be positive", i)
		case p.UsedMiB != nil && (*p.UsedMiB < 0 || *p.UsedMiB > maxSimUsedMiB):
			return nil, fmt.Errorf("entry %d: usedMiB %d out of range 0..%d", i, *p.UsedMiB, int64(maxSimUsedMiB))
		case p.Kind() == ProcessKindUnknown:
			return nil, fmt.Errorf("entry %d: type %q: want direct, mps or server", i, p.Type)
		case p.SMUtil != nil && *p.SMUtil > 100:
			return nil, fmt.Errorf("entry %d: smUtil %d out of range 0..100", i, *p.SMUtil)
		}
	}
	return list, nil
}

func (r SimCardRef) String() string {
	if r.UUID != "" {
		return r.UUID
	}
	return strconv.Itoa(r.Index)
}

// simCardIndex is the index of the card r names, -1 when none.
func simCardIndex(r SimCardRef, devices []Device) int {
	for _, d := range devices {
		if (r.UUID != "" && r.UUID == d.UUID) || (r.UUID == "" && r.Index == d.Index) {
			return d.Index
		}
	}
	return -1
}

// readSimProcesses reads the simulated processes file at path, on every call so a test can
// change it. No path or no file: no processes.
func readSimProcesses(path string, devices []Device) ([]SimProcess, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("simulated processes file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSimProcessesBytes+1))
	if err != nil {
		return nil, fmt.Errorf("simulated processes file: %w", err)
	}
	list, err := ParseSimProcesses(b, devices)
	if err != nil {
		return nil, fmt.Errorf("simulated processes file %s: %w", path, err)
	}
	return list, nil
}

// simProcessesOf returns the processes of card index in the simulated processes file at
// path (readSimProcesses), each of the kind its type says.
func simProcessesOf(path string, devices []Device, index int) ([]Process, error) {
	list, err := readSimProcesses(path, devices)
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, p := range list {
		if simCardIndex(p.Card, devices) != index {
			continue
		}
		q := Process{PID: p.PID, Kind: p.Kind()}
		if p.UsedMiB != nil {
			q.UsedBytes, q.UsedKnown = uint64(*p.UsedMiB)<<20, true
		}
		out = append(out, q)
	}
	return mergeProcesses(out), nil
}
