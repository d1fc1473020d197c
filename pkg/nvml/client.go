//go:build cgo

package nvml

import (
	"context"
	"fmt"
	"math"
	"path"
	"strings"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
)

// Library is go-nvml's interface, re-exported so callers can pass one around without
// importing go-nvml themselves.
type Library = nvml.Interface

// waitMillis bounds one EventSet.Wait so WatchFaults notices a cancelled context.
const waitMillis = 1000

// Client implements Interface over a go-nvml library (real or mock).
type Client struct {
	lib nvml.Interface

	utilMu sync.Mutex
	// utilSince is, per card index, the timestamp (µs) of the newest utilisation sample
	// ProcessUtilization returned: the next call asks for newer ones only.
	utilSince map[int]uint64
}

var _ Interface = (*Client)(nil)

// New initialises lib and returns a Client over it. Call Shutdown when done.
func New(lib Library) (*Client, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("initialising NVML: %v", ret)
	}
	return &Client{lib: lib}, nil
}

// SystemLibrary returns the driver's NVML library (libnvidia-ml.so.1 unless path is set).
// Nothing is loaded until New calls Init.
func SystemLibrary(path string) Library {
	if path == "" {
		return nvml.New()
	}
	return nvml.New(nvml.WithLibraryPath(path))
}

// Shutdown releases the library.
func (c *Client) Shutdown() error {
	if ret := c.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("shutting NVML down: %v", ret)
	}
	return nil
}

// Devices lists the cards in NVML index order with their UUID, product name and total MiB.
func (c *Client) Devices() ([]Device, error) {
	n, ret := c.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("counting NVML devices: %v", ret)
	}
	out := make([]Device, 0, n)
	for i := 0; i < n; i++ {
		d, err := c.device(i)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (c *Client) device(i int) (Device, error) {
	h, ret := c.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return Device{}, fmt.Errorf("getting NVML device %d: %v", i, ret)
	}
	uuid, ret := h.GetUUID()
	if ret != nvml.SUCCESS {
		return Device{}, fmt.Errorf("reading UUID of NVML device %d: %v", i, ret)
	}
	name, ret := h.GetName()
	if ret != nvml.SUCCESS {
		return Device{}, fmt.Errorf("reading name of NVML device %d: %v", i, ret)
	}
	mem, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return Device{}, fmt.Errorf("reading memory of NVML device %d: %v", i, ret)
	}
	minor, ret := h.GetMinorNumber()
	if ret != nvml.SUCCESS {
		// Only a per-allocation CDI spec needs it; that refuses the card then.
		klog.InfoS("NVML does not tell the card's device-node minor number", "index", i, "error", ret)
		minor = -1
	}
	return Device{Index: i, UUID: uuid, Model: name, MemoryMiB: int64(mem.Total >> 20), Minor: minor}, nil
}

// UsedMemoryMiB returns the memory in use on card index, in MiB.
func (c *Client) UsedMemoryMiB(index int) (int64, error) {
	h, ret := c.lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("getting NVML device %d: %v", index, ret)
	}
	mem, ret := h.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("reading memory of NVML device %d: %v", index, ret)
	}
	return int64(mem.Used >> 20), nil
}

// Processes lists the compute, graphics and MPS client processes of card index, one entry
// per PID (mergeProcesses), each with its Kind: an MPS client when NVML lists it among the
// card's MPS compute processes, else the MPS server when NVML names it MPSServerName, else
// direct; ProcessKindUnknown for all when the card or driver has no MPS list. A list the
// card does not support (ERROR_NOT_SUPPORTED; for the MPS list also a driver without the
// call) is empty.
func (c *Client) Processes(index int) ([]Process, error) {
	h, ret := c.lib.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("getting NVML device %d: %v", index, ret)
	}
	lists := make([][]Process, 0, 3)
	mpsListed := false
	for _, l := range []struct {
		kind string
		get  func() ([]nvml.ProcessInfo, nvml.Return)
		as   ProcessKind
	}{
		{"compute", h.GetComputeRunningProcesses, ProcessDirect},
		{"graphics", h.GetGraphicsRunningProcesses, ProcessDirect},
		{"MPS compute", h.GetMPSComputeRunningProcesses, ProcessMPSClient},
	} {
		infos, ret := l.get()
		switch {
		case ret == nvml.SUCCESS:
		case ret == nvml.ERROR_NOT_SUPPORTED, l.as == ProcessMPSClient && ret == nvml.ERROR_FUNCTION_NOT_FOUND:
			continue
		default:
			return nil, fmt.Errorf("listing %s processes of NVML device %d: %v", l.kind, index, ret)
		}
		mpsListed = mpsListed || l.as == ProcessMPSClient
		lists = append(lists, processesOf(infos, l.as))
	}
	procs := mergeProcesses(lists...)
	for i, p := range procs {
		switch {
		case !mpsListed:
			procs[i].Kind = ProcessKindUnknown
		case p.Kind == ProcessDirect && c.isMPSServer(p.PID):
			procs[i].Kind = ProcessMPSServer
		}
	}
	return procs, nil
}

// processesOf converts NVML's entries to Processes of kind.
func processesOf(infos []nvml.ProcessInfo, kind ProcessKind) []Process {
	procs := make([]Process, 0, len(infos))
	for _, in := range infos {
		p := Process{PID: in.Pid, Kind: kind}
		// NVML_VALUE_NOT_AVAILABLE is -1 as an unsigned long long: unknown, not 16 EiB.
		if in.UsedGpuMemory != uint64(math.MaxUint64) {
			p.UsedBytes, p.UsedKnown = in.UsedGpuMemory, true
		}
		procs = append(procs, p)
	}
	return procs
}

// isMPSServer reports whether NVML names process pid MPSServerName (as a bare name or a
// path); false when it cannot tell (the process is gone, or not in NVML's PID namespace).
func (c *Client) isMPSServer(pid uint32) bool {
	name, ret := c.lib.SystemGetProcessName(int(pid))
	return ret == nvml.SUCCESS && path.Base(strings.TrimSpace(name)) == MPSServerName
}

// WatchFaults registers every card for critical XID events and forwards the ones that are
// not application XIDs. Cards that do not support XID events are logged and skipped.
func (c *Client) WatchFaults(ctx context.Context, out chan<- Fault) error {
	set, ret := c.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("creating NVML event set: %v", ret)
	}
	defer set.Free()
	n, ret := c.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("counting NVML devices: %v", ret)
	}
	for i := 0; i < n; i++ {
		if err := c.register(set, i); err != nil {
			klog.ErrorS(err, "Card health is not watched", "index", i)
		}
	}
	for ctx.Err() == nil {
		e, ret := set.Wait(waitMillis)
		switch {
		case ret == nvml.ERROR_TIMEOUT:
			continue
		case ret != nvml.SUCCESS:
			klog.V(2).InfoS("Waiting for NVML events failed", "error", ret)
			continue
		case e.EventType != nvml.EventTypeXidCriticalError:
			continue
		case IsApplicationXID(e.EventData):
			klog.V(2).InfoS("Ignoring application XID", "xid", e.EventData)
			continue
		}
		f := Fault{XID: e.EventData}
		if e.Device != nil {
			if uuid, ret := e.Device.GetUUID(); ret == nvml.SUCCESS {
				f.UUID = uuid
			}
		}
		select {
		case out <- f:
		case <-ctx.Done():
		}
	}
	return nil
}

func (c *Client) register(set nvml.EventSet, i int) error {
	h, ret := c.lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("getting NVML device %d: %v", i, ret)
	}
	supported, ret := h.GetSupportedEventTypes()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("reading supported events of NVML device %d: %v", i, ret)
	}
	if supported&nvml.EventTypeXidCriticalError == 0 {
		return fmt.Errorf("NVML device %d does not report XID events", i)
	}
	if ret := h.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
		return fmt.Errorf("registering XID events of NVML device %d: %v", i, ret)
	}
	return nil
}
