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
}

// Interface is what share-plugin needs from NVML.
type Interface interface {
	// Devices lists the cards in NVML index order.
	Devices() ([]Device, error)
	// UsedMemoryMiB returns the memory in use on the card with the given NVML index, in MiB.
	UsedMemoryMiB(index int) (int64, error)
	// Processes lists the processes running on the card with the given NVML index, compute
	// and graphics together, one entry per PID in ascending PID order.
	Processes(index int) ([]Process, error)
	// WatchFaults sends a Fault on out for every critical, non-application XID until ctx is
	// done. It returns nil when ctx ends and an error when the watch cannot be set up.
	WatchFaults(ctx context.Context, out chan<- Fault) error
	// Shutdown releases the library.
	Shutdown() error
}

// ErrNoCgo is what New returns for the real library in a binary built without cgo (go-nvml
// needs cgo; simulated nodes still work).
var ErrNoCgo = errors.New("this share-plugin was built with CGO_ENABLED=0: only simulated GPUs work; real NVML needs a cgo build (CGO_ENABLED=1)")
