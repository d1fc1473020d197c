//go:build cgo

package limithook

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"
)

// setCall is one SetMemoryLimits_v1 call the mock saw.
type setCall struct {
	UUID, Namespace string
	Soft, Hard      uint64
}

// mockLib is an NVML library with cards uuids, each answering SetMemoryLimits_v1 and
// GetMemoryLimits_v1 with ret, recording the set calls in calls.
func mockLib(ret nvml.Return, calls *[]setCall, uuids ...string) *mock.Interface {
	devs := map[string]*mock.Device{}
	for _, u := range uuids {
		devs[u] = &mock.Device{
			SetMemoryLimits_v1Func: func(ns string, soft, hard uint64) nvml.Return {
				*calls = append(*calls, setCall{UUID: u, Namespace: ns, Soft: soft, Hard: hard})
				return ret
			},
			GetMemoryLimits_v1Func: func(string) (nvml.MemoryLimits_v1, nvml.Return) {
				if ret == nvml.SUCCESS {
					return nvml.MemoryLimits_v1{}, nvml.ERROR_NOT_FOUND
				}
				return nvml.MemoryLimits_v1{}, ret
			},
		}
	}
	return &mock.Interface{
		DeviceGetHandleByUUIDFunc: func(u string) (nvml.Device, nvml.Return) {
			if d, ok := devs[u]; ok {
				return d, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
		ExtensionsFunc: func() nvml.ExtendedInterface {
			return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return nil }}
		},
	}
}

func TestRunNVMLSetsEachCardsLimitOnTheContainersCgroup(t *testing.T) {
	var calls []setCall
	lib := mockLib(nvml.SUCCESS, &calls, "GPU-a", "GPU-b")
	a := Args{Mode: ModeNVML, ProcRoot: fakeProc(t, 31337, cgroupV2), CgroupRoot: "/sys/fs/cgroup",
		Limits: []Limit{{UUID: "GPU-a", MiB: 4096}, {UUID: "GPU-b", MiB: 1024}}}
	if err := Run(context.Background(), a, stateJSON(containerID, 31337), NVMLSetter{Lib: lib, CgroupRoot: a.CgroupRoot}); err != nil {
		t.Fatalf("Run = %v", err)
	}
	want := []setCall{
		{UUID: "GPU-a", Namespace: "/sys/fs/cgroup" + podCgroup, Soft: 4096 << 20, Hard: 4096 << 20},
		{UUID: "GPU-b", Namespace: "/sys/fs/cgroup" + podCgroup, Soft: 1024 << 20, Hard: 1024 << 20},
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
		lib := mockLib(nvml.SUCCESS, &calls, "GPU-a")
		a := Args{Mode: ModeNVML, ProcRoot: fakeProc(t, 5, cgroupV2), CgroupRoot: "/sys/fs/cgroup", Limits: []Limit{{UUID: "GPU-a", MiB: 2048}}}
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
		ret      nvml.Return
		cgroup   string
		uuid     string
		wantText []string
	}{
		{name: "not supported", ret: nvml.ERROR_NOT_SUPPORTED, cgroup: cgroupV2, uuid: "GPU-a", wantText: []string{"GPU-a", "R615", "cgroup v2"}},
		{name: "old library", ret: nvml.ERROR_FUNCTION_NOT_FOUND, cgroup: cgroupV2, uuid: "GPU-a", wantText: []string{"R615"}},
		{name: "cgroup not opened", ret: nvml.ERROR_OPERATING_SYSTEM, cgroup: cgroupV2, uuid: "GPU-a", wantText: []string{"cannot open cgroup /sys/fs/cgroup" + podCgroup}},
		{name: "unknown card", ret: nvml.SUCCESS, cgroup: cgroupV2, uuid: "GPU-z", wantText: []string{"GPU-z"}},
		{name: "cgroup v1 host", ret: nvml.SUCCESS, cgroup: cgroupV1, uuid: "GPU-a", wantText: []string{"cgroup v2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls []setCall
			lib := mockLib(tc.ret, &calls, "GPU-a")
			a := Args{Mode: ModeNVML, ProcRoot: fakeProc(t, 8, tc.cgroup), CgroupRoot: "/sys/fs/cgroup", Limits: []Limit{{UUID: tc.uuid, MiB: 1024}}}
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
		lib     *mock.Interface
		root    string
		wantErr string
	}{
		{name: "supported", lib: mockLib(nvml.SUCCESS, &calls, "GPU-a"), root: v2},
		{name: "root cgroup not opened: the call exists", lib: mockLib(nvml.ERROR_OPERATING_SYSTEM, &calls, "GPU-a"), root: v2},
		{name: "driver says not supported", lib: mockLib(nvml.ERROR_NOT_SUPPORTED, &calls, "GPU-a"), root: v2, wantErr: "R615"},
		{name: "no cgroup v2", lib: mockLib(nvml.SUCCESS, &calls, "GPU-a"), root: t.TempDir(), wantErr: "cgroup v2"},
		{name: "library without the call", lib: func() *mock.Interface {
			l := mockLib(nvml.SUCCESS, &calls, "GPU-a")
			l.ExtensionsFunc = func() nvml.ExtendedInterface {
				return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return errors.New("undefined symbol") }}
			}
			return l
		}(), root: v2, wantErr: "nvmlDeviceSetMemoryLimits_v1"},
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
