// Package cuda is the probe's CUDA driver API: libcuda.so.1, loaded at run time with
// github.com/ebitengine/purego, so gpushare-probe builds without cgo and without the CUDA
// toolkit, and runs in containers with or without the driver. Open returns a probe.Driver.
//
// Loading a library needs the C library's dynamic loader: built with purego, gpushare-probe
// is linked against libc even with CGO_ENABLED=0, and runs only where libc is (the NVIDIA
// CUDA images, distroless/base). Built with -tags nocuda it is static, loads nothing, and its
// driver checks say cannot verify: the build for images without libc, such as the scratch
// share-plugin image of simulated GPUs.
//
// A CUDA context is current on an OS thread: the caller keeps its goroutine on one thread
// (runtime.LockOSThread) for as long as it uses the Driver.
package cuda
