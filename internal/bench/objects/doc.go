// Package objects builds the GPU-sharing nodes and gpu-mem pods the benchmarks create:
// nodes carry the per-card inventory annotation and the capacity the extender and the
// device plugin publish on a real node, pods ask for gpu-mem as a user's pod spec does.
// Neither ever runs a container, so pods are built to need no kubelet. dra.go holds the DRA
// back end's DeviceClass and the memory claims the DRA benchmarks create.
package objects

const (
	// LabelGPUProduct is the standard GPU model label (NVIDIA GPU feature discovery).
	LabelGPUProduct = "nvidia.com/gpu.product"
	// LabelHostname is the well-known hostname label a kubelet would set.
	LabelHostname = "kubernetes.io/hostname"
	// placeholderImage is never pulled: no kubelet runs these pods.
	placeholderImage = "registry.k8s.io/pause:3.10"
)
