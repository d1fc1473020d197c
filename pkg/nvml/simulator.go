//go:build cgo

package nvml

import (
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// Simulator is a node with simulated cards, built on go-nvml's mock so Client runs unchanged
// over it. InjectXID raises an XID event as the driver would.
type Simulator struct {
	lib     *mock.Interface
	devices []*mock.Device
	events  chan nvml.EventData
}

// NewSimulator builds the simulated node. Cards without a UUID get SimulatedUUID(node, i).
func NewSimulator(node string, cards []SimCard) (*Simulator, error) {
	if err := validateSimCards(cards); err != nil {
		return nil, fmt.Errorf("simulated GPUs: %w", err)
	}
	s := &Simulator{events: make(chan nvml.EventData, 64)}
	for i, c := range cards {
		if c.UUID == "" {
			c.UUID = SimulatedUUID(node, i)
		}
		s.devices = append(s.devices, newSimDevice(i, c))
	}
	s.lib = &mock.Interface{
		InitFunc:        func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:    func() nvml.Return { return nvml.SUCCESS },
		ErrorStringFunc: func(r nvml.Return) string { return r.String() },
		DeviceGetCountFunc: func() (int, nvml.Return) {
			return len(s.devices), nvml.SUCCESS
		},
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(s.devices) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return s.devices[i], nvml.SUCCESS
		},
		EventSetCreateFunc: func() (nvml.EventSet, nvml.Return) {
			return s.eventSet(), nvml.SUCCESS
		},
	}
	return s, nil
}

func newSimDevice(i int, c SimCard) *mock.Device {
	total := uint64(c.MemoryMiB) << 20
	return &mock.Device{
		GetIndexFunc: func() (int, nvml.Return) { return i, nvml.SUCCESS },
		GetUUIDFunc:  func() (string, nvml.Return) { return c.UUID, nvml.SUCCESS },
		GetNameFunc:  func() (string, nvml.Return) { return c.Model, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: total, Free: total}, nvml.SUCCESS
		},
		GetSupportedEventTypesFunc: func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError, nvml.SUCCESS
		},
		RegisterEventsFunc: func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS },
	}
}

func (s *Simulator) eventSet() nvml.EventSet {
	return &mock.EventSet{
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
			t := time.NewTimer(time.Duration(ms) * time.Millisecond)
			defer t.Stop()
			select {
			case e := <-s.events:
				return e, nvml.SUCCESS
			case <-t.C:
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		},
	}
}

// Library returns the mock to hand to New.
func (s *Simulator) Library() Library { return s.lib }

// InjectXID raises a critical XID event on card index. It fails when the index is out of
// range or too many events are pending (nobody is watching).
func (s *Simulator) InjectXID(index int, xid uint64) error {
	if index < 0 || index >= len(s.devices) {
		return fmt.Errorf("injecting XID %d: card %d does not exist (node has %d)", xid, index, len(s.devices))
	}
	select {
	case s.events <- nvml.EventData{Device: s.devices[index], EventType: nvml.EventTypeXidCriticalError, EventData: xid}:
		return nil
	default:
		return fmt.Errorf("injecting XID %d on card %d: event queue full", xid, index)
	}
}
