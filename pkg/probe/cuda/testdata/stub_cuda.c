/* A stand-in for libcuda.so.1 with the entry points gpushare-probe binds, typed as cuda.h
 * declares them: one card of 16 GiB whose driver refuses allocations beyond LIMIT_MIB,
 * with MPS on. TestStubDriver builds it with gcc and loads it through purego. */
#include <stddef.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

#define LIMIT_MIB 2300ULL
#define MIB (1ULL << 20)

static int ready;
static void *current;
static int ctx_token;
static unsigned long long held;
static int blocks;

CUresult cuInit(unsigned int flags) { ready = flags == 0; return ready ? 0 : 1; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return ready ? 0 : 3; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { if (ordinal != 0) return 101; *d = 7; return 0; }
CUresult cuDeviceGetUuid_v2(unsigned char uuid[16], CUdevice d) {
	for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(i * 17);
	return d == 7 ? 0 : 101;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	strncpy(name, "Stub T4", (size_t)len);
	return d == 7 ? 0 : 101;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) { *bytes = 16384ULL * MIB; return d == 7 ? 0 : 101; }
CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	if (attr != 133 || d != 7) return 1;
	*v = 1;
	return 0;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) { *ctx = &ctx_token; return d == 7 ? 0 : 101; }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { return d == 7 ? 0 : 101; }
CUresult cuCtxSetCurrent(CUcontext ctx) { current = ctx; return 0; }
CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
	if (current != &ctx_token) return 201;
	*free = 16000ULL * MIB - held;
	*total = 16384ULL * MIB;
	return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
	if (current != &ctx_token) return 201;
	if (held + bytes > LIMIT_MIB * MIB) return 2;
	held += bytes;
	blocks++;
	*p = 0x1000ULL * (unsigned long long)blocks;
	return 0;
}
CUresult cuMemFree_v2(CUdeviceptr p) {
	if (p == 0 || blocks == 0) return 1;
	blocks--;
	if (blocks == 0) held = 0;
	return 0;
}
/* How many blocks are still allocated: the test checks every one was freed. */
int stub_blocks(void) { return blocks; }
