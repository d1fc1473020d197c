"""Allocates device memory on CUDA device 0 in steps, through the CUDA driver API alone.

hack/gpu-acceptance.sh's CUDA client: it needs python3 and the driver's libcuda.so.1, no CUDA
toolkit and no framework. Plain cuMemAlloc, never managed memory, so what it holds is device
memory that NVML, MPS and the driver's per-cgroup limits all count.

    python3 cuda_alloc.py STEP_MIB MAX_MIB HOLD_S

Allocates STEP_MIB at a time until MAX_MIB are held or an allocation fails, prints one line
"allocated=<MiB> refused=<yes|no> error=<CUDA error name>", then holds the memory HOLD_S
seconds. Exit status: 0 when it printed that line, 2 when CUDA did not start (the message
says why).
"""
import ctypes
import sys
import time

# A bound of its own, whatever the caller asks: the script promises never to take more.
MAX_ALLOWED_MIB = 20 << 10


def error_name(cuda, ret):
    name = ctypes.c_char_p()
    if cuda.cuGetErrorName(ret, ctypes.byref(name)) != 0 or not name.value:
        return "CUresult %d" % ret
    return name.value.decode()


def main():
    step, most, hold = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    if not 0 < step <= most <= MAX_ALLOWED_MIB:
        sys.exit("want 0 < STEP_MIB <= MAX_MIB <= %d" % MAX_ALLOWED_MIB)
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        print("cuda_alloc: loading libcuda.so.1: %s" % e, file=sys.stderr)
        sys.exit(2)
    # The primary context: the one call sequence stable across every CUDA version (the
    # versioned cuCtxCreate symbols changed in CUDA 12.5 and 13).
    ctx, dev = ctypes.c_void_p(), ctypes.c_int()
    for what, ret in (
        ("cuInit", lambda: cuda.cuInit(0)),
        ("cuDeviceGet", lambda: cuda.cuDeviceGet(ctypes.byref(dev), 0)),
        ("cuDevicePrimaryCtxRetain", lambda: cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)),
        ("cuCtxSetCurrent", lambda: cuda.cuCtxSetCurrent(ctx)),
    ):
        r = ret()
        if r != 0:
            print("cuda_alloc: %s: %s" % (what, error_name(cuda, r)), file=sys.stderr)
            sys.exit(2)
    held, refused, err = 0, "no", "none"
    ptrs = []
    while held + step <= most:
        ptr = ctypes.c_uint64()
        r = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(step << 20))
        if r != 0:
            refused, err = "yes", error_name(cuda, r)
            break
        ptrs.append(ptr)
        held += step
    print("allocated=%d refused=%s error=%s" % (held, refused, err), flush=True)
    time.sleep(hold)


if __name__ == "__main__":
    main()
