// Package nvml is the only package that imports github.com/NVIDIA/go-nvml. It exposes the
// narrow view share-plugin needs: the cards of the node (NVML index, UUID, product name,
// total memory in MiB), a watch for critical XID events, used memory per card, and the
// processes holding memory on each card and their SM utilisation (for share-plugin's usage
// watchdog); and, for gpushare-limit-hook, the driver's per-cgroup memory limits in bytes
// (MemoryLimiter, OpenMemoryLimiter); and, for hack/gpu-acceptance.sh only, the driver's
// version and the limits read back (DriverVersion, ReadMemoryLimits). Every other package
// reaches NVML through it; the test in test/imports fails when one imports go-nvml itself.
//
// The same code runs over the real driver library (SystemLibrary) and over a simulated node
// built on go-nvml's mock package (NewSimulator), so machines without GPUs exercise the
// production code path. go-nvml needs cgo: a binary built with CGO_ENABLED=0 gets a pure-Go
// simulator with the same API instead (nocgo.go) and cannot open the real library (ErrNoCgo;
// OpenMemoryLimiter too).
package nvml
