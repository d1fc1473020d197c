package gpushare

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Default extended-resource names. Both are configurable (see Resources); these are the
// names existing pod specs use.
const (
	// DefaultMemResource is requested by pods in memory units (GiB unless the device plugin
	// runs with another --memory-unit).
	DefaultMemResource corev1.ResourceName = "aliyun.com/gpu-mem"
	// DefaultCountResource is the number of cards on a node (node status) or the number of
	// distinct cards a container wants (container limits; absent means 1).
	DefaultCountResource corev1.ResourceName = "aliyun.com/gpu-count"
)

// Node label that selects GPU-sharing nodes for the device plugin and the extender cache.
const (
	NodeLabelKey   = "cgpu"
	NodeLabelValue = "true"
)

// Pod annotations written by the extender at bind and updated by the device plugin.
const (
	// AnnotationIndex is the decimal index of the card of a single-card pod.
	AnnotationIndex = "ALIYUN_COM_GPU_MEM_IDX"
	// AnnotationPodUnits is the pod's total gpu-mem units (Kubernetes effective request).
	AnnotationPodUnits = "ALIYUN_COM_GPU_MEM_POD"
	// AnnotationDevUnits is the size in units of the card of a single-card pod.
	AnnotationDevUnits = "ALIYUN_COM_GPU_MEM_DEV"
	// AnnotationAssigned is "false" at bind; the device plugin sets "true" once every
	// container requesting gpu-mem went through Allocate.
	AnnotationAssigned = "ALIYUN_COM_GPU_MEM_ASSIGNED"
	// AnnotationAssumeTime is the bind time in Unix nanoseconds (decimal).
	AnnotationAssumeTime = "ALIYUN_COM_GPU_MEM_ASSUME_TIME"
	// AnnotationAllocation is the per-container form read first by inspect and arena:
	// JSON {"<app container index>":{"<card index>":units}}.
	AnnotationAllocation = "scheduler.framework.gpushare.allocation"
	// AnnotationInitAllocation has the same shape as AnnotationAllocation for init containers
	// (index into spec.initContainers). Kept apart so old readers, which parse container keys
	// as integers of spec.containers, are not misled.
	AnnotationInitAllocation = "gpushare.io/init-allocation"
	// AnnotationAllocated records Allocate progress: the containers the device plugin has
	// already served, as a comma list of ContainerRef strings ("app/0", "init/1").
	AnnotationAllocated = "gpushare.io/allocated-containers"
	// AnnotationUnit is the gpu-mem unit the allocation record counts in, spelled as
	// ParseUnit accepts ("GiB", "MiB", "256MiB"): the unit of the node's inventory when the
	// record was written. A record without it (older writers) counts in the node's unit.
	AnnotationUnit = "gpushare.io/gpu-mem-unit"
)

// LabelExtenderLeader ("true") marks the extender replica that holds the leader lease. The
// extender Service selects it, so kube-scheduler's calls reach the leader while every replica
// whose cache has synced reports ready (drains, PodDisruptionBudgets and rollouts count them).
const LabelExtenderLeader = "gpushare.io/extender-leader"

// AnnotationNodeInventory is the node annotation with the per-card inventory that
// share-plugin publishes (JSON Inventory).
const AnnotationNodeInventory = "gpushare.io/gpu-inventory"

// Environment variables returned by the device plugin's Allocate.
const (
	// EnvVisibleDevices lists the chosen card UUIDs, comma separated.
	EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	// EnvIndex lists the chosen card indexes, comma separated.
	EnvIndex = "ALIYUN_COM_GPU_MEM_IDX"
	// EnvPodUnits is the pod's total units (AnnotationPodUnits).
	EnvPodUnits = "ALIYUN_COM_GPU_MEM_POD"
	// EnvContainerUnits is this container's units (all its cards together).
	EnvContainerUnits = "ALIYUN_COM_GPU_MEM_CONTAINER"
	// EnvDevUnits is the size in units of one chosen card (the first when several).
	EnvDevUnits = "ALIYUN_COM_GPU_MEM_DEV"
)

// SimulatedGPUDir is where a container on a node with simulated GPUs and the cdi-cri device
// list strategy finds one read-only file per card it was given, named by the card's UUID and
// holding its JSON description ({"index","uuid","model","memoryMiB"}): what the runtime
// mounted from the simulated cards' CDI spec.
const SimulatedGPUDir = "/run/gpushare/simulated-gpus"

// fakeIDSep separates the card UUID from the unit number in fake device IDs.
const fakeIDSep = "-_-"

// FakeDeviceID is the ID of unit j of the card with the given UUID, as advertised to kubelet
// in ListAndWatch: "<GPU-UUID>-_-<j>".
func FakeDeviceID(uuid string, j int) string {
	return uuid + fakeIDSep + strconv.Itoa(j)
}

// ParseFakeDeviceID splits a FakeDeviceID into the card UUID and unit number.
func ParseFakeDeviceID(id string) (uuid string, j int, err error) {
	i := strings.LastIndex(id, fakeIDSep)
	if i <= 0 {
		return "", 0, fmt.Errorf("device ID %q: want <uuid>%s<n>", id, fakeIDSep)
	}
	j, err = strconv.Atoi(id[i+len(fakeIDSep):])
	if err != nil || j < 0 {
		return "", 0, fmt.Errorf("device ID %q: unit number is not a non-negative integer", id)
	}
	return id[:i], j, nil
}

// Resources holds the configurable extended-resource names.
type Resources struct {
	Mem   corev1.ResourceName
	Count corev1.ResourceName
}

// DefaultResources returns the compatible names aliyun.com/gpu-mem and aliyun.com/gpu-count.
func DefaultResources() Resources {
	return Resources{Mem: DefaultMemResource, Count: DefaultCountResource}
}

// Validate reports empty or identical names.
func (r Resources) Validate() error {
	switch {
	case r.Mem == "":
		return fmt.Errorf("gpu memory resource name is empty")
	case r.Count == "":
		return fmt.Errorf("gpu count resource name is empty")
	case r.Mem == r.Count:
		return fmt.Errorf("gpu memory and gpu count resources are both %q", r.Mem)
	}
	return nil
}
