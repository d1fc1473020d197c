package probe

import "errors"

// Driver is the part of the CUDA driver API the probe uses. It is the seam between the rules
// and libcuda.so.1 (pkg/probe/cuda): tests pass a fake. Cards are numbered as CUDA orders
// them in this process (its ordinals), memory is in MiB.
type Driver interface {
	// Devices lists the cards CUDA shows this process; an empty list and nil when CUDA sees
	// none (CUDA_ERROR_NO_DEVICE).
	Devices() ([]Device, error)
	// MemInfo is the free and total memory the driver reports for card (cuMemGetInfo in the
	// card's primary context), in MiB.
	MemInfo(card int) (freeMiB, totalMiB int64, err error)
	// Alloc allocates mib MiB of device memory on card (cuMemAlloc; never managed memory,
	// which the driver could page out instead of refusing). Errors: ErrOutOfMemory when the
	// driver refuses for lack of memory, or the driver's error.
	Alloc(card int, mib int64) (Block, error)
	// Free releases a block Alloc returned.
	Free(b Block) error
	// Close releases the contexts the driver opened.
	Close() error
}

// Device is one card as CUDA shows it.
type Device struct {
	// UUID as NVIDIA spells it: "GPU-" and the 16 bytes of cuDeviceGetUuid in 8-4-4-4-12 hex.
	UUID string `json:"uuid"`
	// Name is the driver's model name ("Tesla T4").
	Name string `json:"name,omitempty"`
	// TotalMiB is cuDeviceTotalMem.
	TotalMiB int64 `json:"totalMiB"`
	// MPS says whether contexts on the card go through an MPS server
	// (CU_DEVICE_ATTRIBUTE_MPS_ENABLED; MPSUnknown where the driver predates it).
	MPS MPSState `json:"mps"`
}

// Block is device memory Alloc returned.
type Block struct {
	Card int
	Ptr  uint64
	MiB  int64
}

// MPSState is whether a card's contexts go through MPS.
type MPSState string

const (
	MPSYes     MPSState = "yes"
	MPSNo      MPSState = "no"
	MPSUnknown MPSState = "unknown"
)

// Errors a Driver returns.
var (
	// ErrOutOfMemory: the driver refused an allocation for lack of memory
	// (CUDA_ERROR_OUT_OF_MEMORY), which is how a limit shows.
	ErrOutOfMemory = errors.New("out of device memory")
	// ErrNoDriver: libcuda.so.1 could not be loaded or initialised (simulated cards, or an
	// image without the driver's library).
	ErrNoDriver = errors.New("no CUDA driver")
)
