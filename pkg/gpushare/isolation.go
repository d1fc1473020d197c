package gpushare

import "fmt"

// LabelIsolation is the node label that states how the cards of a node keep their tenants
// apart: IsolationNone (also when the label is absent), IsolationMPS or IsolationLimit. Node labels are set
// by cluster administrators; tenants cannot write them.
const LabelIsolation = "gpushare.io/isolation"

// Isolation is a node's enforcement mode, the value of LabelIsolation.
type Isolation string

const (
	// IsolationNone is cooperative sharing: the ALIYUN_COM_GPU_MEM_* contract tells each
	// container its grant and share-plugin's usage watchdog reports containers above it;
	// nothing stops a container from allocating the whole card.
	IsolationNone Isolation = "none"
	// IsolationMPS runs each card behind an NVIDIA MPS control daemon and gives each
	// container a pinned device-memory limit equal to its grant, so CUDA allocations beyond
	// the grant fail inside that container.
	IsolationMPS Isolation = "mps"
	// IsolationLimit gives each container, per card, a hard memory limit equal to its grant,
	// set by the NVIDIA driver on the container's cgroup v2 (nvmlDeviceSetMemoryLimits_v1)
	// from an OCI hook that share-plugin's per-allocation CDI spec names: allocations beyond
	// the grant fail inside that container, whatever its environment says.
	IsolationLimit Isolation = "limit"
)

// LabelIsolationEnforced is the node label share-plugin sets to the isolation it can
// really enforce for the mode LabelIsolation asks: the same mode, or IsolationNone where
// the node lacks what the mode needs (Allocate then refuses the node's GPU containers).
const LabelIsolationEnforced = "gpushare.io/isolation-enforced"

// ParseIsolation reads a LabelIsolation value; "" (no label) is IsolationNone. Errors: any
// other value, naming the label and the accepted values.
func ParseIsolation(v string) (Isolation, error) {
	switch i := Isolation(v); i {
	case "":
		return IsolationNone, nil
	case IsolationNone, IsolationMPS, IsolationLimit:
		return i, nil
	}
	return "", fmt.Errorf("node label %s=%q: want %s, %s or %s", LabelIsolation, v, IsolationNone, IsolationMPS, IsolationLimit)
}

// NodeIsolation reads a node's LabelIsolation from its labels (ParseIsolation).
func NodeIsolation(labels map[string]string) (Isolation, error) {
	return ParseIsolation(labels[LabelIsolation])
}

// Admits reports whether a node in mode i can take a pod asking req: nil, or an error naming
// the first container the mode refuses. IsolationMPS takes one card per container: each card
// has an MPS control daemon of its own and a CUDA process connects to one daemon, so a
// container on two cards would run unlimited on one of them. This is the one copy of the
// rule: the scheduler side (the ledger's fit) and share-plugin's Allocate both ask it.
//
// A container with a memory limit above its request (AnnotationMemLimit) needs
// IsolationLimit: the driver's per-cgroup soft and hard limits are what let it burst to its
// limit and no further; MPS caps a container at one pinned limit and none caps nothing.
// A container with a compute share (AnnotationComputeShare) needs IsolationMPS: its MPS
// control daemon's default active thread percentage is what caps its SMs.
func (i Isolation) Admits(req PodRequest) error {
	if i != IsolationMPS {
		for _, c := range req.Containers {
			if c.Compute > 0 {
				return fmt.Errorf("container %q has a compute share (%s: %d percent), which only nodes labelled %s=%s enforce, and this node is %s",
					c.Name, AnnotationComputeShare, c.Compute, LabelIsolation, IsolationMPS, i)
			}
		}
	}
	if i != IsolationLimit {
		for _, c := range req.Containers {
			if c.Limited() {
				return fmt.Errorf("container %q has a GPU-memory limit (%s: %d above its request %d), which only nodes labelled %s=%s enforce, and this node is %s",
					c.Name, AnnotationMemLimit, c.Limit, c.Units, LabelIsolation, IsolationLimit, i)
			}
		}
	}
	if i != IsolationMPS {
		return nil
	}
	for _, c := range req.Containers {
		if c.Cards > 1 {
			return fmt.Errorf("node isolates cards with MPS (%s=%s): one card per container, and container %q asks for %d",
				LabelIsolation, IsolationMPS, c.Name, c.Cards)
		}
	}
	return nil
}

// Environment variables share-plugin's Allocate adds for a container on an IsolationMPS node:
// NVIDIA's MPS client settings, read by the CUDA driver library when the container's process
// initialises CUDA.
const (
	// EnvMPSPinnedMemLimit caps the device memory the container's CUDA processes may allocate
	// through MPS, per device as the container sees it (MPSMemLimit).
	EnvMPSPinnedMemLimit = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
	// EnvMPSPipeDirectory is the folder of the card's MPS control daemon's pipes and sockets.
	EnvMPSPipeDirectory = "CUDA_MPS_PIPE_DIRECTORY"
	// EnvMPSLogDirectory is the folder of the card's MPS control daemon's logs.
	EnvMPSLogDirectory = "CUDA_MPS_LOG_DIRECTORY"
)

// MPSMemLimit is the EnvMPSPinnedMemLimit value that caps device 0, the container's only
// card, at mib MiB: "0=4096M". The device is named by its index as the container sees it
// (its cards numbered from 0), not by UUID: NVIDIA's device plugin found limits given by
// UUID not applied by MPS and switched to indexes (NVIDIA/k8s-device-plugin pull 572).
func MPSMemLimit(mib int64) string {
	return fmt.Sprintf("0=%dM", mib)
}

// DefaultMPSRoot is the default MPS root on the nodes (share-plugin's --mps-root,
// gpushare-mps's --root): the MPS daemons' folders, one per card and cap, whose layout is
// pkg/mps's.
const DefaultMPSRoot = "/run/gpushare/mps"

// LabelVerifyRun is the label of the probe pods `kubectl inspect gpushare --verify` creates
// (value: the run's ID, five lowercase letters and digits), by which the run finds and
// deletes them, and a user finds any a killed run left behind.
const LabelVerifyRun = "gpushare.io/verify-run"
