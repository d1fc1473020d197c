//go:build cgo

package nvml

import (
	"fmt"
	"math"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"k8s.io/klog/v2"
)

// Simulator is a node with simulated cards, built on go-nvml's mock so Client runs unchanged
// over it. InjectXID raises an XID event as the driver would.
type Simulator struct {
	lib     *mock.Interface
	devices []*mock.Device
	cards   []Device // what devices report, for the processes file
	events  chan nvml.EventData
	// procFile is the simulated processes file (SetProcessesFile); empty: no processes.
	procFile string
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
		s.cards = append(s.cards, Device{Index: i, UUID: c.UUID, Model: c.Model, MemoryMiB: c.MemoryMiB, Minor: i})
		d := newSimDevice(i, c)
		d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return s.processInfos(i, false) }
		d.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return s.processInfos(i, true) }
		d.GetProcessUtilizationFunc = func(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
			return s.utilization(i, since)
		}
		s.devices = append(s.devices, d)
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
		SystemGetProcessNameFunc: s.processName,
	}
	return s, nil
}

func newSimDevice(i int, c SimCard) *mock.Device {
	total := uint64(c.MemoryMiB) << 20
	return &mock.Device{
		GetIndexFunc:       func() (int, nvml.Return) { return i, nvml.SUCCESS },
		GetMinorNumberFunc: func() (int, nvml.Return) { return i, nvml.SUCCESS },
		GetUUIDFunc:        func() (string, nvml.Return) { return c.UUID, nvml.SUCCESS },
		GetNameFunc:        func() (string, nvml.Return) { return c.Model, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: total, Free: total}, nvml.SUCCESS
		},
		GetSupportedEventTypesFunc: func() (uint64, nvml.Return) {
			return nvml.EventTypeXidCriticalError, nvml.SUCCESS
		},
		RegisterEventsFunc: func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS },
		GetGraphicsRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return nil, nvml.SUCCESS
		},
	}
}

// SetProcessesFile makes the cards list the entries of the YAML file at path
// (ParseSimProcesses), read again on every call: every entry as a compute process, those of
// type mps also as MPS clients, and those of type server named MPSServerName. Not
// synchronised: call it before the processes are listed.
func (s *Simulator) SetProcessesFile(path string) { s.procFile = path }

// processInfos is what NVML would list for card i, its MPS clients only when mps, with
// NVML's "not available" value for an entry without usedMiB. An unreadable file is logged
// and reported as NVML's ERROR_UNKNOWN.
func (s *Simulator) processInfos(i int, mps bool) ([]nvml.ProcessInfo, nvml.Return) {
	procs, err := simProcessesOf(s.procFile, s.cards, i)
	if err != nil {
		klog.ErrorS(err, "Reading simulated processes")
		return nil, nvml.ERROR_UNKNOWN
	}
	out := make([]nvml.ProcessInfo, 0, len(procs))
	for _, p := range procs {
		if mps && p.Kind != ProcessMPSClient {
			continue
		}
		used := uint64(math.MaxUint64)
		if p.UsedKnown {
			used = p.UsedBytes
		}
		out = append(out, nvml.ProcessInfo{Pid: p.PID, UsedGpuMemory: used})
	}
	return out, nvml.SUCCESS
}

// utilization is what NVML would report as card i's process utilisation since the
// timestamp since: one sample per entry of the processes file that sets smUtil, stamped
// with the wall clock in µs, or ERROR_NOT_FOUND when there is none (or none is newer).
func (s *Simulator) utilization(i int, since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	util, err := simUtilizationOf(s.procFile, s.cards, i)
	if err != nil {
		klog.ErrorS(err, "Reading simulated processes")
		return nil, nvml.ERROR_UNKNOWN
	}
	now := uint64(time.Now().UnixMicro())
	if len(util) == 0 || now <= since {
		return nil, nvml.ERROR_NOT_FOUND
	}
	out := make([]nvml.ProcessUtilizationSample, 0, len(util))
	for _, u := range util {
		out = append(out, nvml.ProcessUtilizationSample{Pid: u.PID, TimeStamp: now, SmUtil: u.SMPercent})
	}
	return out, nvml.SUCCESS
}

// processName is NVML's name of process pid: MPSServerName for an entry of type server, else
// NVML's answer for a process it cannot see (ERROR_NOT_FOUND).
func (s *Simulator) processName(pid int) (string, nvml.Return) {
	list, err := readSimProcesses(s.procFile, s.cards)
	if err != nil {
		klog.ErrorS(err, "Reading simulated processes")
		return "", nvml.ERROR_UNKNOWN
	}
	for _, p := range list {
		if int(p.PID) == pid && p.Kind() == ProcessMPSServer {
			return MPSServerName, nvml.SUCCESS
		}
	}
	return "", nvml.ERROR_NOT_FOUND
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
