package nvml

import (
	"context"
	"errors"
)

// Device is one card as NVML reports it.
type Device struct {
	Index     int    // NVML index
	UUID      string // "GPU-…"
	Model     string // product name, e.g. "Tesla T4"
	MemoryMiB int64  // total memory in MiB (a T4 reports 15079)
	// Minor is the card's device-node minor number, /dev/nvidia<Minor> (NVML's minor
	// number, not always the index); -1 when NVML cannot tell.
	Minor int
}

// Fault is a critical XID event that is not caused by an application: the card it names
// should take no new work for a while.
type Fault struct {
	// UUID of the faulty card; empty when NVML could not tell which card, meaning all.
	UUID string
	// XID is the NVML XID code (e.g. 79: the GPU has fallen off the bus).
	XID uint64
}

// Process is one process holding memory on a card, as NVML lists it.
type Process struct {
	PID uint32 // in the host's PID namespace
	// UsedBytes is the card memory the process holds; meaningful only when UsedKnown.
	UsedBytes uint64
	// UsedKnown is false when NVML cannot tell the process's memory (it reports
	// NVML_VALUE_NOT_AVAILABLE, e.g. on Windows WDDM or for some MIG and vGPU setups): the
	// process is listed but its use is unknown, not huge.
	UsedKnown bool
	// Kind is how the process reaches the card: through an MPS server or with a context of
	// its own.
	Kind ProcessKind
}

// ProcessUtilization is one process's share of a card's engines over a sampling window, as
// nvmlDeviceGetProcessUtilization reports it: the mean of the driver's samples for the
// process in the window. Under time-slicing (no MPS) the card's busy time is split between
// its processes (two busy processes on an H200, driver R580: 47 and 53); under MPS the
// driver reports the MPS server alone (one entry, 100 when its clients keep it busy), never
// its clients.
type ProcessUtilization struct {
	PID uint32 // in the host's PID namespace
	// SMPercent is the percentage of the window in which one or more of the process's
	// kernels ran on the card's SMs, 0..100.
	SMPercent uint32
	// MemPercent is the percentage of the window in which the process read or wrote the
	// card's memory, 0..100.
	MemPercent uint32
}

// ErrUtilizationUnsupported: the card or driver does not report per-process utilisation
// (nvmlDeviceGetProcessUtilization answers NOT_SUPPORTED, or the library lacks the call).
var ErrUtilizationUnsupported = errors.New("NVML does not report per-process utilisation")

// ProcessKind is how a process reaches a card, as NVML's process lists and names tell it.
type ProcessKind uint8

const (
	// ProcessKindUnknown: NVML does not list the card's MPS clients (a driver or card
	// without nvmlDeviceGetMPSComputeRunningProcesses), so a client cannot be told from a
	// process of its own.
	ProcessKindUnknown ProcessKind = iota
	// ProcessDirect holds a context of its own on the card (nvidia-smi's type C, G or C+G):
	// no MPS server stands between it and the card's memory, so no MPS limit holds it.
	ProcessDirect
	// ProcessMPSClient reaches the card through an MPS server (nvidia-smi's type M+C or M):
	// NVML lists it among the card's MPS compute processes.
	ProcessMPSClient
	// ProcessMPSServer is an MPS server, the context in which its clients' work runs: a
	// process of its own named MPSServerName.
	ProcessMPSServer
)

// MPSServerName is the process name of NVIDIA's MPS server (nvidia-smi's process name), which
// the MPS control daemon starts for its clients.
const MPSServerName = "nvidia-cuda-mps-server"

func (k ProcessKind) String() string {
	switch k {
	case ProcessDirect:
		return "direct"
	case ProcessMPSClient:
		return "mps"
	case ProcessMPSServer:
		return "server"
	}
	return "unknown"
}

// Interface is what share-plugin needs from NVML.
type Interface interface {
	// Devices lists the cards in NVML index order.
	Devices() ([]Device, error)
	// UsedMemoryMiB returns the memory in use on the card with the given NVML index, in MiB.
	UsedMemoryMiB(index int) (int64, error)
	// Processes lists the processes running on the card with the given NVML index, compute,
	// graphics and MPS clients together, one entry per PID in ascending PID order, each with
	// its Kind.
	Processes(index int) ([]Process, error)
	// ProcessUtilization returns, per process with samples on the card with the given NVML
	// index since the previous call for that card (the first call: every sample the driver
	// still holds), its mean SM and memory-controller utilisation in percent, in ascending
	// PID order; empty when NVML has no new sample (nvmlDeviceGetProcessUtilization's
	// ERROR_NOT_FOUND: nothing ran). Errors: ErrUtilizationUnsupported (wrapped) when the
	// card or driver does not report it, another NVML answer otherwise. Safe for concurrent
	// use; call it once per sampling interval per card, since each call moves the card's
	// "since" mark.
	ProcessUtilization(index int) ([]ProcessUtilization, error)
	// WatchFaults sends a Fault on out for every critical, non-application XID until ctx is
	// done. It returns nil when ctx ends and an error when the watch cannot be set up.
	WatchFaults(ctx context.Context, out chan<- Fault) error
	// Shutdown releases the library.
	Shutdown() error
}

// ErrNoCgo is what New returns for the real library in a binary built without cgo (go-nvml
// needs cgo; simulated nodes still work).
var ErrNoCgo = errors.New("this share-plugin was built with CGO_ENABLED=0: only simulated GPUs work; real NVML needs a cgo build (CGO_ENABLED=1)")

// LimitCall is the NVML call per-cgroup GPU memory limits need; drivers before R615 lack it.
const LimitCall = "nvmlDeviceSetMemoryLimits_v1"

// The answers of MemoryLimiter that mean the node cannot limit memory per cgroup; each is
// returned wrapped, with the card's UUID and NVML's own text of the answer.
var (
	// ErrLimitsUnsupported: the driver, the library or the card has no per-cgroup limits
	// (NVML's NOT_SUPPORTED or FUNCTION_NOT_FOUND).
	ErrLimitsUnsupported = errors.New("NVML does not support memory limits")
	// ErrCgroupNotOpened: the driver cannot open the cgroup (NVML's OPERATING_SYSTEM), e.g. a
	// cgroup v1 path or one the driver does not see.
	ErrCgroupNotOpened = errors.New("the driver cannot open cgroup")
)

// MemoryLimits is what the driver holds for one cgroup on one card, read back with
// ReadMemoryLimits (hack/gpu-acceptance.sh only).
type MemoryLimits struct {
	SoftBytes, HardBytes uint64
	// UsedBytes is what the cgroup's processes hold on the card now.
	UsedBytes uint64
}

// MemoryLimiter is the driver's per-cgroup GPU memory limits (LimitCall, NVIDIA driver R615
// and later, cgroup v2), which gpushare-limit-hook sets on a container's cgroup.
type MemoryLimiter interface {
	// HasLimitCall is nil when the library has LimitCall, else an error saying it lacks it.
	HasLimitCall() error
	// SetMemoryLimits sets the soft and hard limit, in bytes, of the card with uuid for the
	// cgroup v2 at host path cgroup. Errors name the card: it is not found, ErrLimitsUnsupported,
	// ErrCgroupNotOpened, or another NVML answer.
	SetMemoryLimits(uuid, cgroup string, soft, hard uint64) error
	// ProbeMemoryLimits asks the driver for the limits of the cgroup at host path cgroup on
	// the card with uuid, which tells whether the call exists for the card: nil for any
	// answer but ErrLimitsUnsupported's, which is then the error, as is a card not found.
	ProbeMemoryLimits(uuid, cgroup string) error
	// Close releases the library.
	Close()
}
