// Package limithook is the OCI hook that gives a container a hard GPU-memory limit per card,
// set by the NVIDIA driver on the container's cgroup v2 (NVML nvmlDeviceSetMemoryLimits_v1),
// for nodes labelled gpushare.io/isolation=limit. The soft limit is the grant; the hard limit
// is the grant too, or the container's memory limit where its pod declares one above it
// (gpushare.AnnotationMemLimit), and the pod's cgroup gets the sums of both.
//
// share-plugin's per-allocation CDI spec names the hook with the container's card UUIDs and
// limits as arguments (FormatArgs); the runtime runs it with the container's state on stdin
// (ReadPID), the hook finds the container's cgroup from /proc/<pid>/cgroup (CgroupOf) and sets
// each card's limit (Run). Nothing comes from the container's environment: the runtime runs a
// hook with the env of the hook entry only, and the hook reads none.
//
// The hook is a createRuntime hook, not a createContainer one: both run before pivot_root, but
// runc runs createContainer hooks inside the container's namespaces, with the state's pid as
// the container sees it (1 in its own PID namespace) and /proc/<pid>/cgroup relative to the
// container's cgroup namespace, so the host's cgroup path cannot be derived there.
// createRuntime hooks run in the runtime's namespaces with the host PID (OCI runtime spec,
// config.md "CreateRuntime Hooks"; runc libcontainer/process_linux.go and rootfs_linux.go).
//
// The hook is bounded: each NVML call (OpenNVML, each SetLimit) is abandoned at the hook's
// --deadline (DefaultDeadline), shorter than the hook entry's timeout
// (RuntimeTimeoutSeconds), so the hook says what hung before the runtime kills it. On any
// failure it leaves a FailureRecord in --failure-dir (WriteFailure), with a reason of
// Reasons, which share-plugin counts as gpushare_limit_hook_failures_total.
//
// Simulated cards (share-plugin --simulate) have no driver: the hook records each limit in a
// file beside the card's file (Record, ReadRecords), so the whole path runs without a GPU.
package limithook
