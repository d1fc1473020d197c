//go:build linux && !nocuda

package cuda

import (
	"errors"
	"fmt"

	"github.com/ebitengine/purego"

	"github.com/gpushare/gpushare/pkg/probe"
)

// DefaultLibrary is the driver library the NVIDIA container runtime mounts.
const DefaultLibrary = "libcuda.so.1"

// driver is libcuda's entry points and the primary contexts retained so far (by ordinal).
type driver struct {
	api  api
	devs []int32
	ctxs map[int]uintptr
}

// Open loads lib (DefaultLibrary, or a path), binds the entry points and initialises CUDA.
// Errors wrap probe.ErrNoDriver when the library is absent, lacks an entry point, or cuInit
// fails for any reason but seeing no card (then Devices is empty).
func Open(lib string) (probe.Driver, error) {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("%w: loading %s: %v", probe.ErrNoDriver, lib, err)
	}
	d := &driver{ctxs: map[int]uintptr{}}
	if err := d.api.bind(h); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", probe.ErrNoDriver, lib, err)
	}
	switch r := d.api.cuInit(0); r {
	case cudaSuccess:
	case cudaErrorNoDevice:
		return d, nil
	default:
		return nil, fmt.Errorf("%w: cuInit: %v", probe.ErrNoDriver, result(r))
	}
	var n int32
	if err := result(d.api.cuDeviceGetCount(&n)).wrap("cuDeviceGetCount"); err != nil {
		return nil, err
	}
	for i := range n {
		var dev int32
		if err := result(d.api.cuDeviceGet(&dev, i)).wrap("cuDeviceGet"); err != nil {
			return nil, err
		}
		d.devs = append(d.devs, dev)
	}
	return d, nil
}

// Devices reads each card's UUID, name, memory and MPS attribute.
func (d *driver) Devices() ([]probe.Device, error) {
	out := make([]probe.Device, 0, len(d.devs))
	for i, dev := range d.devs {
		var uuid [16]byte
		if err := result(d.api.uuid(&uuid, dev)).wrap("cuDeviceGetUuid"); err != nil {
			return nil, fmt.Errorf("card %d: %w", i, err)
		}
		var name [256]byte
		if err := result(d.api.cuDeviceGetName(&name[0], int32(len(name)), dev)).wrap("cuDeviceGetName"); err != nil {
			return nil, fmt.Errorf("card %d: %w", i, err)
		}
		var total uint64
		if err := result(d.api.cuDeviceTotalMem(&total, dev)).wrap("cuDeviceTotalMem"); err != nil {
			return nil, fmt.Errorf("card %d: %w", i, err)
		}
		out = append(out, probe.Device{UUID: formatUUID(uuid), Name: cString(name[:]), TotalMiB: int64(total >> 20), MPS: d.mps(dev)})
	}
	return out, nil
}

// mps reads CU_DEVICE_ATTRIBUTE_MPS_ENABLED; a driver that does not know it says unknown.
func (d *driver) mps(dev int32) probe.MPSState {
	var v int32
	if d.api.cuDeviceGetAttribute(&v, attributeMPSEnabled, dev) != cudaSuccess {
		return probe.MPSUnknown
	}
	if v != 0 {
		return probe.MPSYes
	}
	return probe.MPSNo
}

// current makes card's primary context current on this thread, retaining it the first time.
func (d *driver) current(card int) error {
	if card < 0 || card >= len(d.devs) {
		return fmt.Errorf("card %d: CUDA shows %d", card, len(d.devs))
	}
	ctx, ok := d.ctxs[card]
	if !ok {
		if err := result(d.api.cuDevicePrimaryCtxRetain(&ctx, d.devs[card])).wrap("cuDevicePrimaryCtxRetain"); err != nil {
			return err
		}
		d.ctxs[card] = ctx
	}
	return result(d.api.cuCtxSetCurrent(ctx)).wrap("cuCtxSetCurrent")
}

// MemInfo is cuMemGetInfo in card's primary context, in MiB.
func (d *driver) MemInfo(card int) (int64, int64, error) {
	if err := d.current(card); err != nil {
		return 0, 0, err
	}
	var free, total uint64
	if err := result(d.api.cuMemGetInfo(&free, &total)).wrap("cuMemGetInfo"); err != nil {
		return 0, 0, err
	}
	return int64(free >> 20), int64(total >> 20), nil
}

// Alloc is cuMemAlloc of mib MiB on card; CUDA_ERROR_OUT_OF_MEMORY is probe.ErrOutOfMemory.
func (d *driver) Alloc(card int, mib int64) (probe.Block, error) {
	if err := d.current(card); err != nil {
		return probe.Block{}, err
	}
	var ptr uint64
	switch r := d.api.cuMemAlloc(&ptr, uint64(mib)<<20); r {
	case cudaSuccess:
		return probe.Block{Card: card, Ptr: ptr, MiB: mib}, nil
	case cudaErrorOutOfMemory:
		return probe.Block{}, probe.ErrOutOfMemory
	default:
		return probe.Block{}, result(r).wrap("cuMemAlloc")
	}
}

// Free is cuMemFree in the block's card's context.
func (d *driver) Free(b probe.Block) error {
	if err := d.current(b.Card); err != nil {
		return err
	}
	return result(d.api.cuMemFree(b.Ptr)).wrap("cuMemFree")
}

// Close releases the primary contexts retained.
func (d *driver) Close() error {
	var errs []error
	for card := range d.ctxs {
		errs = append(errs, result(d.api.cuDevicePrimaryCtxRelease(d.devs[card])).wrap("cuDevicePrimaryCtxRelease"))
	}
	d.ctxs = map[int]uintptr{}
	return errors.Join(errs...)
}
