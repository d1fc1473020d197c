//go:build linux && !nocuda

package cuda

import (
	"fmt"

	"github.com/ebitengine/purego"
)

// CUresult values the probe tells apart (cuda.h).
const (
	cudaSuccess          = 0
	cudaErrorOutOfMemory = 2
	cudaErrorNoDevice    = 100
)

// attributeMPSEnabled is CU_DEVICE_ATTRIBUTE_MPS_ENABLED; a driver older than the attribute
// answers CUDA_ERROR_INVALID_VALUE, read as MPS unknown.
const attributeMPSEnabled = 133

// api holds libcuda's entry points, typed as cuda.h declares them: CUresult is int32,
// CUdevice int32, size_t and CUdeviceptr uint64, CUcontext a pointer.
type api struct {
	cuInit                    func(flags uint32) int32
	cuDeviceGetCount          func(count *int32) int32
	cuDeviceGet               func(dev *int32, ordinal int32) int32
	uuid                      func(uuid *[16]byte, dev int32) int32
	cuDeviceGetName           func(name *byte, n int32, dev int32) int32
	cuDeviceTotalMem          func(bytes *uint64, dev int32) int32
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) int32
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) int32
	cuDevicePrimaryCtxRelease func(dev int32) int32
	cuCtxSetCurrent           func(ctx uintptr) int32
	cuMemGetInfo              func(free, total *uint64) int32
	cuMemAlloc                func(ptr *uint64, bytes uint64) int32
	cuMemFree                 func(ptr uint64) int32
}

// bind looks each entry point up in the library handle h. The _v2 symbols are the ones
// cuda.h maps the plain names to since CUDA 3.2 (64-bit sizes) and 11 (primary context
// release); cuDeviceGetUuid_v2 (11.4) falls back to cuDeviceGetUuid. Errors: a symbol that is
// missing (not a CUDA driver, or one too old).
func (a *api) bind(h uintptr) error {
	for _, f := range []struct {
		fn    any
		names []string
	}{
		{&a.cuInit, []string{"cuInit"}},
		{&a.cuDeviceGetCount, []string{"cuDeviceGetCount"}},
		{&a.cuDeviceGet, []string{"cuDeviceGet"}},
		{&a.uuid, []string{"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}},
		{&a.cuDeviceGetName, []string{"cuDeviceGetName"}},
		{&a.cuDeviceTotalMem, []string{"cuDeviceTotalMem_v2"}},
		{&a.cuDeviceGetAttribute, []string{"cuDeviceGetAttribute"}},
		{&a.cuDevicePrimaryCtxRetain, []string{"cuDevicePrimaryCtxRetain"}},
		{&a.cuDevicePrimaryCtxRelease, []string{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"}},
		{&a.cuCtxSetCurrent, []string{"cuCtxSetCurrent"}},
		{&a.cuMemGetInfo, []string{"cuMemGetInfo_v2"}},
		{&a.cuMemAlloc, []string{"cuMemAlloc_v2"}},
		{&a.cuMemFree, []string{"cuMemFree_v2"}},
	} {
		sym, err := lookup(h, f.names)
		if err != nil {
			return err
		}
		purego.RegisterFunc(f.fn, sym)
	}
	return nil
}

// lookup is the first of names the library exports.
func lookup(h uintptr, names []string) (uintptr, error) {
	var last error
	for _, n := range names {
		sym, err := purego.Dlsym(h, n)
		if err == nil && sym != 0 {
			return sym, nil
		}
		last = err
	}
	return 0, fmt.Errorf("no symbol %s: %v", names[0], last)
}

// result is a CUresult that is an error unless it is cudaSuccess.
type result int32

func (r result) Error() string { return fmt.Sprintf("CUresult %d", int32(r)) }

// wrap is nil for success, else the call's name and the code.
func (r result) wrap(call string) error {
	if r == cudaSuccess {
		return nil
	}
	return fmt.Errorf("%s: %w", call, r)
}

// formatUUID spells a CUuuid as NVIDIA's tools do: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func formatUUID(b [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// cString is the NUL-terminated string at the start of b.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
