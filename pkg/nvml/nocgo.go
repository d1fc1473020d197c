//go:build !cgo

package nvml

import (
	"context"
	"fmt"
)

// Without cgo go-nvml (real and mock) does not compile. So that a CGO_ENABLED=0 build still
// runs simulated nodes (demo, e2e), this file provides a pure-Go simulator behind the same
// API; the real library is unavailable (New returns ErrNoCgo).

// Library is what New accepts; without cgo only a Simulator is usable.
type Library interface{ library() }

type noLibrary struct{}

func (noLibrary) library() {}

// SystemLibrary stands for the driver library, which a build without cgo cannot load.
func SystemLibrary(string) Library { return noLibrary{} }

// Simulator is a node with simulated cards; InjectXID raises an XID as the driver would.
type Simulator struct {
	devices  []Device
	events   chan Fault
	procFile string
}

// SetProcessesFile makes the cards list the processes of the YAML file at path
// (ParseSimProcesses), read again on every call. Not synchronised: call it before the
// processes are listed.
func (s *Simulator) SetProcessesFile(path string) { s.procFile = path }

// NewSimulator builds the simulated node. Cards without a UUID get SimulatedUUID(node, i).
func NewSimulator(node string, cards []SimCard) (*Simulator, error) {
	if err := validateSimCards(cards); err != nil {
		return nil, fmt.Errorf("simulated GPUs: %w", err)
	}
	s := &Simulator{events: make(chan Fault, 64)}
	for i, c := range cards {
		if c.UUID == "" {
			c.UUID = SimulatedUUID(node, i)
		}
		s.devices = append(s.devices, Device{Index: i, UUID: c.UUID, Model: c.Model, MemoryMiB: c.MemoryMiB, Minor: i})
	}
	return s, nil
}

func (*Simulator) library() {}

// Library returns the simulator to hand to New.
func (s *Simulator) Library() Library { return s }

// InjectXID raises a critical XID event on card index.
func (s *Simulator) InjectXID(index int, xid uint64) error {
	if index < 0 || index >= len(s.devices) {
		return fmt.Errorf("injecting XID %d: card %d does not exist (node has %d)", xid, index, len(s.devices))
	}
	select {
	case s.events <- Fault{UUID: s.devices[index].UUID, XID: xid}:
		return nil
	default:
		return fmt.Errorf("injecting XID %d on card %d: event queue full", xid, index)
	}
}

// New returns a client over a Simulator; the real library needs cgo (ErrNoCgo).
func New(lib Library) (Interface, error) {
	s, ok := lib.(*Simulator)
	if !ok {
		return nil, ErrNoCgo
	}
	return simClient{s}, nil
}

type simClient struct{ s *Simulator }

func (c simClient) Devices() ([]Device, error) { return append([]Device(nil), c.s.devices...), nil }

func (c simClient) UsedMemoryMiB(index int) (int64, error) {
	if index < 0 || index >= len(c.s.devices) {
		return 0, fmt.Errorf("simulated card %d does not exist", index)
	}
	return 0, nil
}

func (c simClient) Processes(index int) ([]Process, error) {
	if index < 0 || index >= len(c.s.devices) {
		return nil, fmt.Errorf("simulated card %d does not exist", index)
	}
	return simProcessesOf(c.s.procFile, c.s.devices, index)
}

func (c simClient) ProcessUtilization(index int) ([]ProcessUtilization, error) {
	if index < 0 || index >= len(c.s.devices) {
		return nil, fmt.Errorf("simulated card %d does not exist", index)
	}
	return simUtilizationOf(c.s.procFile, c.s.devices, index)
}

func (c simClient) WatchFaults(ctx context.Context, out chan<- Fault) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case f := <-c.s.events:
			if IsApplicationXID(f.XID) {
				continue
			}
			select {
			case out <- f:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

func (simClient) Shutdown() error { return nil }

// OpenMemoryLimiter fails: the driver's memory limits need the real library (ErrNoCgo).
func OpenMemoryLimiter(Library) (MemoryLimiter, error) { return nil, ErrNoCgo }

// DriverVersion fails: it needs the real library (ErrNoCgo).
func DriverVersion(string) (string, error) { return "", ErrNoCgo }

// ReadMemoryLimits fails: it needs the real library (ErrNoCgo).
func ReadMemoryLimits(string, string, string) (MemoryLimits, error) {
	return MemoryLimits{}, ErrNoCgo
}
