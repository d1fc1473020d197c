package gpushare

// Environment variables NVIDIA's container toolkit hook `nvidia-cdi-hook
// apply-cuda-memory-limits` reads from a container's OCI spec: a container's GPU-memory soft
// limit (request) and hard limit, in whole MiB, per card, which the hook sets on the
// container's cgroup through NVML (the call gpushare-limit-hook makes). share-plugin's
// per-allocation CDI spec sets them when it hands the limits to that hook (share-plugin's
// --nvidia-cdi-hook-path). Public sources disagree on singular or plural names across
// toolkit versions, so the spec sets both spellings to the same values; the admission policy
// gpushare-reserved-env keeps tenants from setting any NVIDIA_* variable.
const (
	EnvToolkitMemRequest  = "NVIDIA_GPU_MEMORY_REQUEST"
	EnvToolkitMemLimit    = "NVIDIA_GPU_MEMORY_LIMIT"
	EnvToolkitMemRequests = "NVIDIA_GPU_MEMORY_REQUESTS"
	EnvToolkitMemLimits   = "NVIDIA_GPU_MEMORY_LIMITS"
)

// ToolkitApplyLimitsHook is the subcommand of nvidia-cdi-hook that applies those limits.
const ToolkitApplyLimitsHook = "apply-cuda-memory-limits"
