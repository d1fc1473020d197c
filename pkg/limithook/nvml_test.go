//go:build cgo

package limithook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	gpunvml "github.com/gpushare/gpushare/pkg/nvml"
)

// setCall is one SetMemoryLimits call the fake saw.
type setCall struct {
	UUID, Namespace string
	Soft, Hard      uint64
}

// The driver's answers the fake gives; pkg/nvml's own tests map NVML's return codes to them.
const (
	answerSuccess      = "success"
	answerUnsupported  = "not supported"
	answerCgroupClosed = "cgroup not opened"
	answerNoCall       = "library without the call"
)

// fakeLimiter is NVML's memory limits on cards uuids, answering every set and probe with
// answer as gpunvml.MemoryLimiter words it, recording the set calls in calls.
type fakeLimiter struct {
	uuids  []string
	answer string
	calls  *[]setCall
}

var _ gpunvml.MemoryLimiter = fakeLimiter{}

func mockLib(answer string, calls *[]setCall, uuids ...string) fakeLimiter {
	return fakeLimiter{uuids: uuids, answer: answer, calls: calls}
}

func (f fakeLimiter) HasLimitCall() error {
	if f.answer == answerNoCall {
		return fmt.Errorf("the NVML library has no %s (undefined symbol)", gpunvml.LimitCall)
	}
	return nil
}

func (f fakeLimiter) SetMemoryLimits(uuid, cgroup string, soft, hard uint64) error {
	if err := f.find(uuid); err != nil {
		return err
	}
	*f.calls = append(*f.calls, setCall{UUID: uuid, Namespace: cgroup, Soft: soft, Hard: hard})
	switch f.answer {
	case answerUnsupported, answerNoCall:
		return fmt.Errorf("card %s: %w here (Not Supported)", uuid, gpunvml.ErrLimitsUnsupported)
	case answerCgroupClosed:
		return fmt.Errorf("card %s: %w %s (Operating System error)", uuid, gpunvml.ErrCgroupNotOpened, cgroup)
	}
	return nil
}

func (f fakeLimiter) ProbeMemoryLimits(uuid, _ string) error {
	if err := f.find(uuid); err != nil {
		return err
	}
	if f.answer == answerUnsupported || f.answer == answerNoCall {
		return fmt.Errorf("card %s: %w (Not Supported)", uuid, gpunvml.ErrLimitsUnsupported)
	}
	return nil
}

func (fakeLimiter) Close() {}

func (f fakeLimiter) find(uuid string) error {
	for _, u := range f.uuids {
		if u == uuid {
			return nil
		}
	}
	return fmt.Errorf("card %s: finding it in NVML: Not Found", uuid)
}

// The pod's limits go on the parent of the container's cgroup, under either kubelet cgroup
// driver, each QoS class and runtime, before the container's own; a container whose cgroup is
// no pod container's, or another pod's, is refused before any limit is set.
func TestRunNVMLSetsThePodsAndTheContainersLimits(t *testing.T) {
	const (
		uid     = "0b5c1f0e-8d1e-4f57-9a0c-6c1e2a3b4c5d"
		escaped = "0b5c1f0e_8d1e_4f57_9a0c_6c1e2a3b4c5d"
		other   = "9f8e7d6c-0000-4000-8000-000000000000"
	)
	tests := []struct {
		name       string
		container  string // the container's cgroup
		pod        string // its pod's; "": refused
		wantReason string
	}{
		{name: "cgroupfs, burstable", container: "/kubepods/burstable/pod" + uid + "/" + containerID, pod: "/kubepods/burstable/pod" + uid},
		{name: "cgroupfs, besteffort", container: "/kubepods/besteffort/pod" + uid + "/" + containerID, pod: "/kubepods/besteffort/pod" + uid},
		{name: "cgroupfs, guaranteed", container: "/kubepods/pod" + uid + "/" + containerID, pod: "/kubepods/pod" + uid},
		{name: "cgroupfs, cri-o", container: "/kubepods/burstable/pod" + uid + "/crio-" + containerID, pod: "/kubepods/burstable/pod" + uid},
		{
			name:      "systemd, burstable, containerd",
			container: "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + escaped + ".slice/cri-containerd-" + containerID + ".scope",
			pod:       "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + escaped + ".slice",
		},
		{
			name:      "systemd, besteffort, cri-o",
			container: "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + escaped + ".slice/crio-" + containerID + ".scope",
			pod:       "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + escaped + ".slice",
		},
		{
			name:      "systemd, guaranteed, containerd",
			container: "/kubepods.slice/kubepods-pod" + escaped + ".slice/cri-containerd-" + containerID + ".scope",
			pod:       "/kubepods.slice/kubepods-pod" + escaped + ".slice",
		},
		{
			name:      "systemd under a kubelet --cgroup-root in a node's own cgroup",
			container: "/system.slice/node.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + escaped + ".slice/cri-containerd-" + containerID + ".scope",
			pod:       "/system.slice/node.scope/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod" + escaped + ".slice",
		},
		{name: "no pod cgroup: a kubelet without pod cgroups", container: "/kubepods/" + containerID, wantReason: ReasonCgroup},
		{name: "no pod cgroup: a process outside Kubernetes", container: "/system.slice/containerd.service", wantReason: ReasonCgroup},
		{name: "no pod cgroup: the pod's own cgroup", container: "/kubepods/burstable/pod" + uid, wantReason: ReasonCgroup},
		{name: "no pod cgroup: nested below the container", container: "/kubepods.slice/kubepods-pod" + escaped + ".slice/crio-" + containerID + ".scope/container", wantReason: ReasonCgroup},
		{name: "another pod, cgroupfs", container: "/kubepods/burstable/pod" + other + "/" + containerID, wantReason: ReasonPodMismatch},
		{name: "another pod, systemd", container: "/kubepods.slice/kubepods-pod9f8e7d6c_0000_4000_8000_000000000000.slice/cri-containerd-" + containerID + ".scope", wantReason: ReasonPodMismatch},
		{name: "a longer UID", container: "/kubepods/burstable/pod" + uid + "-5f6a/" + containerID, wantReason: ReasonPodMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls []setCall
			lib := mockLib(answerSuccess, &calls, "GPU-a", "GPU-b")
			a := Args{Mode: ModeNVML, ProcRoot: fakeProc(t, 31337, "0::"+tc.container+"\n"), CgroupRoot: "/sys/fs/cgroup",
				Limits:    []Limit{{UUID: "GPU-a", MiB: 4096}, {UUID: "GPU-b", MiB: 1024}},
				PodUID:    uid,
				PodLimits: []Limit{{UUID: "GPU-a", MiB: 6144}, {UUID: "GPU-b", MiB: 1024}},
			}
			err := Run(context.Background(), a, stateJSON(containerID, 31337), NVMLSetter{Lib: lib, CgroupRoot: a.CgroupRoot})
			if tc.wantReason != "" {
				if r, _ := ReasonOf(err); err == nil || r != tc.wantReason {
					t.Fatalf("Run = %v (reason %q), want a refusal of reason %s", err, r, tc.wantReason)
				}
				if !strings.Contains(err.Error(), tc.container) {
					t.Errorf("refusal %q does not name the container's cgroup", err)
				}
				if tc.wantReason == ReasonPodMismatch && !strings.Contains(err.Error(), "serves pod "+uid+" only") {
					t.Errorf("refusal %q does not say the spec serves pod %s only", err, uid)
				}
				if len(calls) != 0 {
					t.Errorf("a refused container got limits: %+v", calls)
				}
				return
			}
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			want := []setCall{
				{UUID: "GPU-a", Namespace: "/sys/fs/cgroup" + tc.pod, Soft: 6144 << 20, Hard: 6144 << 20},
				{UUID: "GPU-b", Namespace: "/sys/fs/cgroup" + tc.pod, Soft: 1024 << 20, Hard: 1024 << 20},
				{UUID: "GPU-a", Namespace: "/sys/fs/cgroup" + tc.container, Soft: 4096 << 20, Hard: 4096 << 20},
				{UUID: "GPU-b", Namespace: "/sys/fs/cgroup" + tc.container, Soft: 1024 << 20, Hard: 1024 << 20},
			}
			if d := cmp.Diff(want, calls); d != "" {
				t.Errorf("SetMemoryLimits_v1 calls (-want +got):\n%s", d)
			}
		})
	}
}

// A container with a memory limit above its grant gets soft = grant and hard = limit, and so
// does its pod (sums over its containers); one without gets soft = hard = grant.
func TestRunNVMLSoftAndHard(t *testing.T) {
	var calls []setCall
	lib := mockLib(answerSuccess, &calls, "GPU-a", "GPU-b")
	a := Args{Mode: ModeNVML, ProcRoot: fakeProc(t, 9, cgroupV2), CgroupRoot: "/sys/fs/cgroup",
		Limits:    []Limit{{UUID: "GPU-a", MiB: 12288, SoftMiB: 4096}, {UUID: "GPU-b", MiB: 1024}},
		PodUID:    testPodUID,
		PodLimits: []Limit{{UUID: "GPU-a", MiB: 14336, SoftMiB: 6144}, {UUID: "GPU-b", MiB: 1024}},
	}
	if err := Run(context.Background(), a, stateJSON(containerID, 9), NVMLSetter{Lib: lib, CgroupRoot: a.CgroupRoot}); err != nil {
		t.Fatalf("Run = %v", err)
	}
	want := []setCall{
		{UUID: "GPU-a", Namespace: "/sys/fs/cgroup" + podCgroup, Soft: 6144 << 20, Hard: 14336 << 20},
		{UUID: "GPU-b", Namespace: "/sys/fs/cgroup" + podCgroup, Soft: 1024 << 20, Hard: 1024 << 20},
		{UUID: "GPU-a", Namespace: "/sys/fs/cgroup" + ctrCgroup, Soft: 4096 << 20, Hard: 12288 << 20},
		{UUID: "GPU-b", Namespace: "/sys/fs/cgroup" + ctrCgroup, Soft: 1024 << 20, Hard: 1024 << 20},
	}
	if d := cmp.Diff(want, calls); d != "" {
		t.Errorf("SetMemoryLimits_v1 calls (-want +got):\n%s", d)
	}
}

// The limits come from the arguments only: the variables a tenant sets in its pod's env (here
// in the hook's own environment, the most the hook could ever see) change nothing.
func TestRunNVMLReadsNoEnvironment(t *testing.T) {
	run := func() []setCall {
		var calls []setCall
		lib := mockLib(answerSuccess, &calls, "GPU-a")
		a := withPod(Args{Mode: ModeNVML, ProcRoot: fakeProc(t, 5, cgroupV2), CgroupRoot: "/sys/fs/cgroup", Limits: []Limit{{UUID: "GPU-a", MiB: 2048}}})
		if err := Run(context.Background(), a, stateJSON(containerID, 5), NVMLSetter{Lib: lib, CgroupRoot: a.CgroupRoot}); err != nil {
			t.Fatalf("Run = %v", err)
		}
		return calls
	}
	clean := run()
	for k, v := range map[string]string{
		"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=99999M",
		"NVIDIA_VISIBLE_DEVICES":           "all",
		"CUDA_VISIBLE_DEVICES":             "0,1",
		"ALIYUN_COM_GPU_MEM_CONTAINER":     "14",
		"ALIYUN_COM_GPU_MEM_DEV":           "14",
	} {
		t.Setenv(k, v)
	}
	if d := cmp.Diff(clean, run()); d != "" {
		t.Errorf("the environment changed the limits (-without +with):\n%s", d)
	}
}

func TestRunNVMLErrors(t *testing.T) {
	tests := []struct {
		name     string
		answer   string
		cgroup   string
		uuid     string
		wantText []string
	}{
		{name: "not supported", answer: answerUnsupported, cgroup: cgroupV2, uuid: "GPU-a", wantText: []string{"GPU-a", "R615", "cgroup v2"}},
		{name: "old library", answer: answerNoCall, cgroup: cgroupV2, uuid: "GPU-a", wantText: []string{"R615"}},
		{name: "cgroup not opened", answer: answerCgroupClosed, cgroup: cgroupV2, uuid: "GPU-a", wantText: []string{"cannot open cgroup /sys/fs/cgroup" + podCgroup + " "}},
		{name: "unknown card", answer: answerSuccess, cgroup: cgroupV2, uuid: "GPU-z", wantText: []string{"GPU-z"}},
		{name: "cgroup v1 host", answer: answerSuccess, cgroup: cgroupV1, uuid: "GPU-a", wantText: []string{"cgroup v2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls []setCall
			lib := mockLib(tc.answer, &calls, "GPU-a")
			a := withPod(Args{Mode: ModeNVML, ProcRoot: fakeProc(t, 8, tc.cgroup), CgroupRoot: "/sys/fs/cgroup", Limits: []Limit{{UUID: tc.uuid, MiB: 1024}}})
			err := Run(context.Background(), a, stateJSON(containerID, 8), NVMLSetter{Lib: lib, CgroupRoot: a.CgroupRoot})
			if err == nil {
				t.Fatal("Run = nil error")
			}
			for _, w := range tc.wantText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Run error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestNVMLSupport(t *testing.T) {
	v2 := t.TempDir()
	mustWrite(t, v2+"/cgroup.controllers", "memory dmem\n")
	var calls []setCall
	tests := []struct {
		name    string
		lib     fakeLimiter
		root    string
		wantErr string
	}{
		{name: "supported", lib: mockLib(answerSuccess, &calls, "GPU-a"), root: v2},
		{name: "root cgroup not opened: the call exists", lib: mockLib(answerCgroupClosed, &calls, "GPU-a"), root: v2},
		{name: "driver says not supported", lib: mockLib(answerUnsupported, &calls, "GPU-a"), root: v2, wantErr: "R615"},
		{name: "an unknown card", lib: mockLib(answerSuccess, &calls, "GPU-z"), root: v2, wantErr: "GPU-a"},
		{name: "no cgroup v2", lib: mockLib(answerSuccess, &calls, "GPU-a"), root: t.TempDir(), wantErr: "cgroup v2"},
		{name: "library without the call", lib: mockLib(answerNoCall, &calls, "GPU-a"), root: v2, wantErr: "nvmlDeviceSetMemoryLimits_v1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := NVMLSupport(tc.lib, tc.root, []string{"GPU-a"})
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("NVMLSupport = %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
	if len(calls) != 0 {
		t.Errorf("NVMLSupport set limits: %+v", calls)
	}
}
